//! Each flush is encoded on a blocking thread and its requests delivered in order
//! ([`crate::sinks::delivery`]).
//!
//! Answers are read as the OTLP/HTTP spec says: 429, 502, 503 and 504 are retried (after the
//! `Retry-After` the receiver gives, else with backoff), as is a connection that fails; any
//! other error status drops the request (`dropped_points.rejected`); a 200 whose
//! `ExportMetricsServiceResponse` reports a partial success counts its rejected points in
//! `dropped_points.rejected` too.

use hyper::Method;
use tokio::task::JoinHandle;

use super::config::OtlpConfig;
use super::encode::Encoder;
use super::state::Running;
use crate::http_client::Answer;
use crate::sinks::delivery::{spawn_http_sink, Destination, Verdict};
use crate::sinks::Context;

/// Starts the otlp backend's task.
pub fn spawn(config: &OtlpConfig, context: Context) -> anyhow::Result<JoinHandle<()>> {
    let encoder = Encoder::new(config);
    let mut running = Running::default();
    let destination = destination(config)?;
    Ok(spawn_http_sink(move |snapshot| encoder.encode(snapshot, &mut running), destination, context))
}

/// The collector's endpoint, with OTLP/HTTP's headers and then the configured ones.
fn destination(config: &OtlpConfig) -> anyhow::Result<Destination> {
    let mut headers = vec![("content-type".to_string(), "application/x-protobuf".to_string())];
    if config.gzip {
        headers.push(("content-encoding".to_string(), "gzip".to_string()));
    }
    config.http.destination("otlp", Method::POST, headers, judge, "otlp")
}

/// OTLP/HTTP's reading of an answer.
pub fn judge(answer: &Answer) -> Verdict {
    match answer.status {
        200..=299 => match partial_success(&answer.body) {
            Some((rejected, reason)) if rejected > 0 => Verdict::Delivered { rejected, reason: Some(reason) },
            _ => Verdict::DELIVERED,
        },
        429 | 502 | 503 | 504 => Verdict::Retry { reason: answer.summary(), after: answer.retry_after },
        _ => Verdict::Rejected(answer.summary()),
    }
}

/// `ExportMetricsServiceResponse { ExportMetricsPartialSuccess partial_success = 1; }` with
/// `{ int64 rejected_data_points = 1; string error_message = 2; }`: the rejected points and
/// the message, when the body holds them (an empty body is a full success).
pub fn partial_success(body: &[u8]) -> Option<(u64, String)> {
    let partial = fields(body).find(|(number, _)| *number == 1).and_then(|(_, value)| value.bytes())?;
    let mut answer = (0, String::new());
    for (number, value) in fields(partial) {
        match (number, value) {
            (1, Field::Varint(rejected)) => answer.0 = rejected,
            (2, Field::Bytes(text)) => answer.1 = String::from_utf8_lossy(text).into_owned(),
            _ => {}
        }
    }
    Some(answer)
}

/// A protobuf field's value, as much as a response needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field<'a> {
    /// A varint.
    Varint(u64),
    /// A length-delimited value.
    Bytes(&'a [u8]),
    /// A fixed64 or fixed32 value (a double's bits, a count, a time).
    Fixed(u64),
}

impl<'a> Field<'a> {
    fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Field::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }
}

/// The fields of a message, until the end or the first malformed one.
pub(super) fn fields(mut body: &[u8]) -> impl Iterator<Item = (u64, Field<'_>)> {
    std::iter::from_fn(move || {
        let key = varint(&mut body)?;
        let value = match key & 7 {
            0 => Field::Varint(varint(&mut body)?),
            1 => {
                let (bytes, rest) = (body.get(..8)?, body.get(8..)?);
                body = rest;
                Field::Fixed(u64::from_le_bytes(bytes.try_into().ok()?))
            }
            5 => {
                let (bytes, rest) = (body.get(..4)?, body.get(4..)?);
                body = rest;
                Field::Fixed(u64::from(u32::from_le_bytes(bytes.try_into().ok()?)))
            }
            2 => {
                let len = usize::try_from(varint(&mut body)?).ok()?;
                let (content, rest) = (body.get(..len)?, body.get(len..)?);
                body = rest;
                Field::Bytes(content)
            }
            _ => return None,
        };
        Some((key >> 3, value))
    })
}

fn varint(body: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = body.split_first()?;
        *body = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}
