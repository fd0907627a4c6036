//! One column of numbers (a field of one series' rows in a block), lossless to the bit.
//!
//! A header byte, then what its mode needs:
//!
//! | header bits | meaning |
//! |---|---|
//! | 0-1 | mode: 0 every value NaN, 1 a copy of an earlier column, 2 decimal, 3 XOR |
//! | 2 | a bitmap of NaN positions follows the header (decimal and XOR modes) |
//! | 3 | decimal mode: deltas (else offsets from the minimum) |
//! | 4-7 | decimal mode: digits after the point, 0-15 |
//!
//! - **copy**: a byte, the earlier column's index (a gauge's min and max equal its value).
//! - **decimal**: every value that is not NaN is `k / 10^d` exactly (counts, whole
//!   milliseconds, `21.37`): the integers `k` are written as a zigzag varint base, then either
//!   offsets from it (the minimum) or, for trends, successive differences less their minimum,
//!   bit-packed at the width the largest needs (a width byte, absent for one value). An idle
//!   counter costs no bits a point; counts that drift cost the bits of their spread.
//! - **XOR** (Gorilla): the first value's 64 bits, then each value XORed with the previous: a
//!   0 bit when equal, else the meaningful bits, reusing the previous window when they fit.

use super::bits::{put_varint, unzigzag, width_of, zigzag, BitReader, BitWriter, ByteReader};
use super::Corrupt;

const ALL_NAN: u8 = 0;
const COPY: u8 = 1;
const DECIMAL: u8 = 2;
const XOR: u8 = 3;
const HAS_NAN: u8 = 1 << 2;
const DELTAS: u8 = 1 << 3;

/// The most digits after the point decimal mode tries.
const MAX_DIGITS: u32 = 15;
/// Decimal mode's integers stay exact in an f64.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// Appends `values`, coded as tightly as this module knows; `earlier` are the columns of the
/// same rows already written (a column equal to one of them is written as a reference).
pub fn encode(values: &[f64], earlier: &[&[f64]], out: &mut Vec<u8>) {
    if let Some(index) = earlier.iter().position(|column| same_bits(column, values)) {
        out.extend_from_slice(&[COPY, index as u8]);
        return;
    }
    if values.len() >= MIN_DIFF_ROWS && !earlier.is_empty() {
        encode_smallest(values, earlier, out);
    } else {
        encode_alone(values, out);
    }
}

/// Rows a column needs before differences from an earlier column are tried.
const MIN_DIFF_ROWS: usize = 4;
/// Marks a copy that is a difference: the index byte's high bit.
const DIFFERENCE: u8 = 0x80;

/// The column alone or as its differences from an earlier one (a gauge rollup's min and max
/// keep close to its value), whichever is smaller.
fn encode_smallest(values: &[f64], earlier: &[&[f64]], out: &mut Vec<u8>) {
    let start = out.len();
    encode_alone(values, out);
    let mut candidate = Vec::new();
    for (index, column) in earlier.iter().enumerate().take(usize::from(DIFFERENCE - 1)) {
        let Some((digits, differences)) = integer_differences(values, column) else { continue };
        candidate.clear();
        candidate.extend_from_slice(&[COPY, DIFFERENCE | index as u8, digits as u8]);
        encode_alone(&differences, &mut candidate);
        if candidate.len() < out.len() - start {
            out.truncate(start);
            out.extend_from_slice(&candidate);
        }
    }
}

/// `values - column` as the integers `k` of `k / 10^d`, when both are exact decimals of `d`
/// digits with no NaN.
fn integer_differences(values: &[f64], column: &[f64]) -> Option<(u32, Vec<f64>)> {
    let digits = decimal_digits(values)?.max(decimal_digits(column)?);
    let scale = 10f64.powi(digits as i32);
    let exact = |v: f64| exact_integer(v, scale);
    values
        .iter()
        .zip(column)
        .map(|(&v, &c)| {
            let difference = exact(v)? - exact(c)?;
            (difference.unsigned_abs() <= MAX_EXACT as u64).then_some(difference as f64)
        })
        .collect::<Option<Vec<f64>>>()
        .map(|differences| (digits, differences))
}

/// The column on its own.
fn encode_alone(values: &[f64], out: &mut Vec<u8>) {
    let nan_bits = f64::NAN.to_bits();
    let nans = values.iter().filter(|v| v.to_bits() == nan_bits).count();
    if nans == values.len() {
        out.push(ALL_NAN);
        return;
    }
    let filtered: Vec<f64>;
    let numbers = if nans == 0 {
        values
    } else {
        filtered = values.iter().copied().filter(|v| v.to_bits() != nan_bits).collect();
        &filtered
    };
    let flag = if nans > 0 { HAS_NAN } else { 0 };
    let header_at = out.len();
    out.push(0);
    if nans > 0 {
        let mut bitmap = BitWriter::new(out);
        values.iter().for_each(|v| bitmap.bit(v.to_bits() == nan_bits));
        bitmap.finish();
    }
    out[header_at] = match decimal_digits(numbers) {
        Some(digits) => flag | put_decimal(numbers, 10f64.powi(digits as i32), out) | (digits as u8) << 4,
        None => {
            put_xor(numbers, out);
            flag | XOR
        }
    };
}

/// Reads `count` values of a column written with no earlier columns.
pub fn decode(input: &mut ByteReader<'_>, count: usize) -> Result<Vec<f64>, Corrupt> {
    let mut values = Vec::with_capacity(count);
    decode_into(input, count, &mut values, &[])?;
    Ok(values)
}

/// Reads `count` values written by [`encode`], appending them to `flat`, where the earlier
/// columns of the rows start at `starts` (each `count` long).
pub fn decode_into(
    input: &mut ByteReader<'_>,
    count: usize,
    flat: &mut Vec<f64>,
    starts: &[usize],
) -> Result<(), Corrupt> {
    let header = input.byte()?;
    match header & 3 {
        ALL_NAN => flat.resize(flat.len() + count, f64::NAN),
        COPY => {
            let reference = input.byte()?;
            let start = *starts
                .get(usize::from(reference & !DIFFERENCE))
                .filter(|&&start| start + count <= flat.len())
                .ok_or(Corrupt("a copy of a column that is not there"))?;
            if reference & DIFFERENCE == 0 {
                flat.extend_from_within(start..start + count);
            } else {
                read_differences(input, count, flat, start)?;
            }
        }
        mode => {
            let nan_at = if header & HAS_NAN != 0 { Some(read_bitmap(input, count)?) } else { None };
            let numbers = nan_at.as_ref().map_or(count, |at| at.iter().filter(|&&nan| !nan).count());
            let first = flat.len();
            if mode == DECIMAL {
                read_decimal(input, numbers, header & DELTAS != 0, u32::from(header >> 4), flat)?;
            } else {
                read_xor(input, numbers, flat)?;
            }
            if let Some(at) = nan_at {
                let decoded = flat.split_off(first);
                let mut next = decoded.into_iter();
                flat.extend(at.iter().map(|&nan| if nan { f64::NAN } else { next.next().unwrap_or(f64::NAN) }));
            }
        }
    }
    Ok(())
}

/// A column written as integer differences from the column at `flat[start..]`.
fn read_differences(
    input: &mut ByteReader<'_>,
    count: usize,
    flat: &mut Vec<f64>,
    start: usize,
) -> Result<(), Corrupt> {
    let digits = u32::from(input.byte()?);
    if digits > MAX_DIGITS {
        return Err(Corrupt("more decimal digits than a column may have"));
    }
    let first = flat.len();
    decode_into(input, count, flat, &[])?;
    let scale = 10f64.powi(digits as i32);
    for row in 0..count {
        let base =
            exact_integer(flat[start + row], scale).ok_or(Corrupt("a difference from a column that is not decimal"))?;
        let difference = flat[first + row];
        if difference.fract() != 0.0 || difference.abs() > MAX_EXACT {
            return Err(Corrupt("a difference that is not an integer"));
        }
        flat[first + row] = (base + difference as i64) as f64 / scale;
    }
    Ok(())
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `count` bits, one per value.
fn read_bitmap(input: &mut ByteReader<'_>, count: usize) -> Result<Vec<bool>, Corrupt> {
    let bytes = input.take(count.div_ceil(8))?;
    let mut bits = BitReader::new(bytes);
    (0..count).map(|_| bits.bit()).collect()
}

/// The fewest digits `d` such that every value is exactly `k / 10^d` for an integer `k`.
fn decimal_digits(values: &[f64]) -> Option<u32> {
    (0..=MAX_DIGITS).find(|&digits| {
        let scale = 10f64.powi(digits as i32);
        values.iter().all(|&value| exact_integer(value, scale).is_some())
    })
}

fn exact_integer(value: f64, scale: f64) -> Option<i64> {
    let k = (value * scale).round();
    let exact = k.abs() <= MAX_EXACT && (k / scale).to_bits() == value.to_bits();
    exact.then_some(k as i64)
}

/// The integer `k` of a value [`decimal_digits`] accepted.
fn integer(value: f64, scale: f64) -> i64 {
    (value * scale).round() as i64
}

/// Writes the values' integers as offsets from their minimum or as deltas, whichever packs
/// tighter; returns the header bits saying which.
fn put_decimal(values: &[f64], scale: f64, out: &mut Vec<u8>) -> u8 {
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    let (mut min_delta, mut max_delta) = (i64::MAX, i64::MIN);
    let mut previous = None;
    for &value in values {
        let k = integer(value, scale);
        (min, max) = (min.min(k), max.max(k));
        if let Some(p) = previous {
            let delta: i64 = k - p;
            (min_delta, max_delta) = (min_delta.min(delta), max_delta.max(delta));
        }
        previous = Some(k);
    }
    let offsets_width = width_of((max as i128 - min as i128) as u64);
    let deltas = values.len() - 1;
    let deltas_width = if deltas == 0 { 0 } else { width_of((max_delta as i128 - min_delta as i128) as u64) };
    let use_deltas = (deltas_width as usize) * deltas + 16 < (offsets_width as usize) * values.len();
    if use_deltas {
        let first = integer(values[0], scale);
        put_varint(out, zigzag(first));
        put_varint(out, zigzag(min_delta));
        put_width(out, deltas_width, values.len());
        let mut bits = BitWriter::new(out);
        let mut previous = first;
        for &value in &values[1..] {
            let k = integer(value, scale);
            bits.put((k as i128 - previous as i128 - min_delta as i128) as u64, deltas_width);
            previous = k;
        }
        bits.finish();
    } else {
        put_varint(out, zigzag(min));
        put_width(out, offsets_width, values.len());
        let mut bits = BitWriter::new(out);
        values.iter().for_each(|&v| bits.put((integer(v, scale) as i128 - min as i128) as u64, offsets_width));
        bits.finish();
    }
    DECIMAL | if use_deltas { DELTAS } else { 0 }
}

/// The packing width, written only when more than one value shares it.
fn put_width(out: &mut Vec<u8>, width: u32, count: usize) {
    if count > 1 {
        out.push(width as u8);
    }
}

fn read_decimal(
    input: &mut ByteReader<'_>,
    count: usize,
    deltas: bool,
    digits: u32,
    values: &mut Vec<f64>,
) -> Result<(), Corrupt> {
    if digits > MAX_DIGITS {
        return Err(Corrupt("more decimal digits than a column may have"));
    }
    let base = unzigzag(input.varint()?);
    let min_delta = if deltas { unzigzag(input.varint()?) } else { 0 };
    let width = if count > 1 { u32::from(input.byte()?) } else { 0 };
    if width > 64 {
        return Err(Corrupt("a bit width over 64"));
    }
    let packed = if deltas { count.saturating_sub(1) } else { count };
    let mut bits = BitReader::new(input.rest());
    let scale = 10f64.powi(digits as i32);
    values.reserve(count);
    let mut current = base;
    if deltas && count > 0 {
        values.push(base as f64 / scale);
    }
    for _ in 0..packed {
        let field = bits.get(width)?;
        current = if deltas {
            current.wrapping_add(min_delta).wrapping_add(field as i64)
        } else {
            base.wrapping_add(field as i64)
        };
        values.push(current as f64 / scale);
    }
    input.take(bits.bytes_used())?;
    Ok(())
}

fn put_xor(values: &[f64], out: &mut Vec<u8>) {
    let mut bits = BitWriter::new(out);
    let mut previous = values[0].to_bits();
    bits.put(previous, 64);
    let (mut leading, mut meaningful) = (u32::MAX, 0u32);
    for value in &values[1..] {
        let xor = value.to_bits() ^ previous;
        previous = value.to_bits();
        if xor == 0 {
            bits.bit(false);
            continue;
        }
        bits.bit(true);
        let (lead, trail) = (xor.leading_zeros().min(63), xor.trailing_zeros());
        let fits = leading != u32::MAX && lead >= leading && trail >= 64 - leading - meaningful;
        if fits {
            bits.bit(false);
        } else {
            bits.bit(true);
            leading = lead;
            meaningful = 64 - lead - trail;
            bits.put(u64::from(leading), 6);
            bits.put(u64::from(meaningful - 1), 6);
        }
        bits.put(xor >> (64 - leading - meaningful), meaningful);
    }
    bits.finish();
}

fn read_xor(input: &mut ByteReader<'_>, count: usize, values: &mut Vec<f64>) -> Result<(), Corrupt> {
    let mut bits = BitReader::new(input.rest());
    values.reserve(count);
    let (mut leading, mut meaningful) = (0u32, 0u32);
    let mut previous = 0u64;
    for index in 0..count {
        if index == 0 {
            previous = bits.get(64)?;
        } else if bits.bit()? {
            if bits.bit()? {
                leading = bits.get(6)? as u32;
                meaningful = bits.get(6)? as u32 + 1;
                if leading + meaningful > 64 {
                    return Err(Corrupt("an XOR window past 64 bits"));
                }
            } else if meaningful == 0 {
                return Err(Corrupt("an XOR value reuses a window never set"));
            }
            previous ^= bits.get(meaningful)? << (64 - leading - meaningful);
        }
        values.push(f64::from_bits(previous));
    }
    input.take(bits.bytes_used())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(values: &[f64], earlier: &[&[f64]]) -> usize {
        let mut out = Vec::new();
        encode(values, earlier, &mut out);
        let mut flat: Vec<f64> = earlier.iter().flat_map(|c| c.iter().copied()).collect();
        let starts: Vec<usize> = (0..earlier.len()).map(|i| i * values.len()).collect();
        let mut input = ByteReader::new(&out);
        decode_into(&mut input, values.len(), &mut flat, &starts).unwrap();
        let back = flat.split_off(starts.len() * values.len());
        assert!(same_bits(&back, values), "{values:?} came back as {back:?}");
        assert_eq!(input.position(), out.len(), "every byte read: {values:?}");
        out.len()
    }

    #[test]
    fn columns_round_trip_to_the_bit_and_pack_what_they_should() {
        let drifting: Vec<f64> = (0..360).map(|i| 1000.0 + ((i * 37) % 61) as f64).collect();
        let cases: &[(&str, Vec<f64>, usize)] = &[
            ("empty", vec![], 1),
            ("idle counter", vec![0.0; 360], 3),
            ("one value", vec![10.0], 2),
            ("counts that drift", drifting, 3 + 360 * 6 / 8 + 1),
            ("a steady rise", (0..360).map(|i| 5.0 + 3.0 * i as f64).collect(), 5),
            ("temperatures", vec![21.37, 21.4, 21.39, -3.5, 0.01], 13),
            ("idle timer min", vec![f64::NAN, 3.0, f64::NAN, 4.0], 5),
            ("all NaN", vec![f64::NAN; 5], 1),
            ("sums of floats", vec![0.1 + 0.2, 1.0 / 3.0, 2.0 / 3.0, 1e300, -0.0, f64::INFINITY], 70),
            ("extremes", vec![f64::MAX, f64::MIN_POSITIVE, -f64::MAX, 5e-324, f64::NEG_INFINITY], 60),
            ("big integers", vec![9.007199254740992e15, -9.007199254740992e15, 0.0], 40),
            ("an odd NaN", vec![f64::from_bits(0x7ff8_0000_0000_0001), 1.0], 30),
        ];
        for (name, values, most) in cases {
            let size = round_trip(values, &[]);
            assert!(size <= *most, "{name}: {size} bytes, expected at most {most}");
        }
        let value = [21.0, 22.5, 19.0];
        assert_eq!(round_trip(&value, &[&[1.0, 2.0, 3.0], &value]), 2, "a copy is two bytes");
        let last: Vec<f64> = (0..60).map(|i| (2000 + (i * 37) % 500) as f64 / 100.0).collect();
        let min: Vec<f64> = (0..60).map(|i| (2000 + (i * 37) % 500 - i % 3) as f64 / 100.0).collect();
        let alone = round_trip(&min, &[]);
        let as_differences = round_trip(&min, &[&last]);
        assert!(as_differences * 3 < alone, "min close to the value: {as_differences} bytes, {alone} alone");
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        encode(&[1.5, 2.25, 1e300], &[], &mut out);
        for cut in 0..out.len() {
            let _ = decode(&mut ByteReader::new(&out[..cut]), 3);
        }
        for header in 0..=255u8 {
            let bytes = [header, 200, 1, 70, 255, 255, 255];
            let _ = decode(&mut ByteReader::new(&bytes), 9);
        }
    }
}
