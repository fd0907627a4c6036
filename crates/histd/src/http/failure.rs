//! An answer that failed: its HTTP status and what went wrong, written as `{"error": …}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::contract::ErrorAnswer;
use crate::query_params::BadParameter;

/// An error with its HTTP status.
#[derive(Debug)]
pub struct Failure(StatusCode, String);

impl Failure {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.0.as_u16()
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.1
    }

    /// A 500 with `message`.
    pub fn internal(message: &str) -> Failure {
        Failure(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
    }

    /// `status` with `message`.
    pub fn new(status: StatusCode, message: &str) -> Failure {
        Failure(status, message.to_string())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorAnswer { error: self.1 })).into_response()
    }
}

impl From<BadParameter> for Failure {
    fn from(error: BadParameter) -> Self {
        Failure(StatusCode::BAD_REQUEST, error.to_string())
    }
}
