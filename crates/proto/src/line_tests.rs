use super::*;

/// A metric as the tables below write it: (name, tags, kind, value, rate).
type Want = (&'static str, &'static str, Kind, Value<'static>, f64);

fn parsed(line: &str) -> Vec<Result<Want, ParseError>> {
    let Line::Metrics(values) = parse_line(line.as_bytes()) else {
        panic!("{line:?} is not a metric line");
    };
    values
        .map(|result| {
            result.map(|m| {
                let leak = |bytes: &[u8]| -> &'static str {
                    Box::leak(String::from_utf8(bytes.to_vec()).unwrap().into_boxed_str())
                };
                let value = match m.value {
                    Value::Member(member) => Value::Member(leak(member).as_bytes()),
                    Value::Number(n) => Value::Number(n),
                    Value::GaugeDelta(n) => Value::GaugeDelta(n),
                };
                (leak(m.name), leak(m.tags.raw()), m.kind, value, m.sample_rate)
            })
        })
        .collect()
}

use Kind::*;
use ParseError::*;
use Value::*;

#[test]
fn accepts_etsy_lines() {
    let cases: &[(&str, &[Result<Want, ParseError>])] = &[
        ("a:1|c", &[Ok(("a", "", Counter, Number(1.0), 1.0))]),
        ("a:1.5|ms", &[Ok(("a", "", Timer, Number(1.5), 1.0))]),
        ("a:0|ms", &[Ok(("a", "", Timer, Number(0.0), 1.0))]),
        ("a:-0.0|ms", &[Ok(("a", "", Timer, Number(-0.0), 1.0))]),
        ("a:1e2|ms", &[Ok(("a", "", Timer, Number(100.0), 1.0))]),
        ("g:10|g", &[Ok(("g", "", Gauge, Number(10.0), 1.0))]),
        ("g:+5|g", &[Ok(("g", "", Gauge, GaugeDelta(5.0), 1.0))]),
        ("g:-3|g", &[Ok(("g", "", Gauge, GaugeDelta(-3.0), 1.0))]),
        ("u:bob|s", &[Ok(("u", "", Set, Member(b"bob"), 1.0))]),
        ("u:|s", &[Ok(("u", "", Set, Member(b"0"), 1.0))]),
        ("a:1|c|@0.1", &[Ok(("a", "", Counter, Number(1.0), 0.1))]),
        ("a:1|c|@.25", &[Ok(("a", "", Counter, Number(1.0), 0.25))]),
        ("a:1|c|@2", &[Ok(("a", "", Counter, Number(1.0), 2.0))]),
        ("a:1|c|@2e-1", &[Ok(("a", "", Counter, Number(1.0), 0.2))]),
        ("a:1|c|@+0.5", &[Ok(("a", "", Counter, Number(1.0), 0.5))]),
        ("a:1|c|@ 0.5", &[Ok(("a", "", Counter, Number(1.0), 0.5))]),
        ("a:1|c|@0.5|junk", &[Ok(("a", "", Counter, Number(1.0), 0.5))]),
        ("a:1| c ", &[Ok(("a", "", Counter, Number(1.0), 1.0))]),
        ("a:0x10|c", &[Ok(("a", "", Counter, Number(16.0), 1.0))]),
        ("a:Infinity|c", &[Err(BadValue)]),
        ("h:7|h", &[Ok(("h", "", Histogram, Number(7.0), 1.0))]),
        ("h:-7|h", &[Ok(("h", "", Histogram, Number(-7.0), 1.0))]),
        ("d:7|d", &[Ok(("d", "", Distribution, Number(7.0), 1.0))]),
        ("a b/c:1|c", &[Ok(("a b/c", "", Counter, Number(1.0), 1.0))]),
        ("k=v;z:1|c", &[Ok(("k=v;z", "", Counter, Number(1.0), 1.0))]),
    ];
    check(cases);
}

#[test]
fn splits_value_groups_like_etsy() {
    let cases: &[(&str, &[Result<Want, ParseError>])] = &[
        (
            "k:1|c:2|c:3|c|@0.5",
            &[
                Ok(("k", "", Counter, Number(1.0), 1.0)),
                Ok(("k", "", Counter, Number(2.0), 1.0)),
                Ok(("k", "", Counter, Number(3.0), 0.5)),
            ],
        ),
        ("k:4|c:250|ms", &[Ok(("k", "", Counter, Number(4.0), 1.0)), Ok(("k", "", Timer, Number(250.0), 1.0))]),
        ("k:1|c|@0.5:2|g", &[Ok(("k", "", Counter, Number(1.0), 0.5)), Ok(("k", "", Gauge, Number(2.0), 1.0))]),
        ("k:1|c:x|c", &[Ok(("k", "", Counter, Number(1.0), 1.0)), Err(BadValue)]),
    ];
    check(cases);
}

#[test]
fn accepts_dogstatsd_lines() {
    let cases: &[(&str, &[Result<Want, ParseError>])] = &[
        ("tg:1|c|#env:prod,role;x", &[Ok(("tg", "env:prod,role;x", Counter, Number(1.0), 1.0))]),
        ("tg2:1|c|@0.5|#a:b", &[Ok(("tg2", "a:b", Counter, Number(1.0), 0.5))]),
        ("t:1|c|#a:b|@0.5", &[Ok(("t", "a:b", Counter, Number(1.0), 0.5))]),
        ("t:1|c|#", &[Ok(("t", "", Counter, Number(1.0), 1.0))]),
        (
            "page.views:1:2:32|d",
            &[
                Ok(("page.views", "", Distribution, Number(1.0), 1.0)),
                Ok(("page.views", "", Distribution, Number(2.0), 1.0)),
                Ok(("page.views", "", Distribution, Number(32.0), 1.0)),
            ],
        ),
        (
            "song.length:240:1|h|@0.5|#a",
            &[
                Ok(("song.length", "a", Histogram, Number(240.0), 0.5)),
                Ok(("song.length", "a", Histogram, Number(1.0), 0.5)),
            ],
        ),
        ("p:1|g|#env:dev|c:ci-83c0", &[Ok(("p", "env:dev", Gauge, Number(1.0), 1.0))]),
        ("p:1|g|c:ci-83c0,in-12", &[Ok(("p", "", Gauge, Number(1.0), 1.0))]),
        ("p:1|c|c:", &[Ok(("p", "", Counter, Number(1.0), 1.0))]),
        ("p:1|c|e:it-false,cn-web,pu-1", &[Ok(("p", "", Counter, Number(1.0), 1.0))]),
        ("p:1|c|card:low|#a", &[Ok(("p", "a", Counter, Number(1.0), 1.0))]),
        ("p:15|c|#env:dev|T1656581400", &[Ok(("p", "env:dev", Counter, Number(15.0), 1.0))]),
        ("p:15|c|T1656581400", &[Ok(("p", "", Counter, Number(15.0), 1.0))]),
        ("p:1|c|#a|unknown:x", &[Ok(("p", "a", Counter, Number(1.0), 1.0))]),
    ];
    check(cases);
}

#[test]
fn rejects_with_a_reason() {
    let cases: &[(&str, &[Result<Want, ParseError>])] = &[
        ("foo", &[Err(NoValue)]),
        (":1|c", &[Err(EmptyName)]),
        ("foo:1", &[Err(NoType)]),
        ("foo:1|", &[Err(NoType)]),
        ("foo:|c", &[Err(BadValue)]),
        ("foo:abc|c", &[Err(BadValue)]),
        ("foo:NaN|c", &[Err(BadValue)]),
        ("foo:1e309|c", &[Err(BadValue)]),
        ("foo:-Infinity|g", &[Err(BadValue)]),
        ("foo:+Infinity|g", &[Err(BadValue)]),
        ("foo:1e300|c|@1e-300", &[Err(BadSampleRate)]),
        ("foo:1|ms|@1e-320", &[Err(BadSampleRate)]),
        ("foo:1e300|g|@1e-300", &[Ok(("foo", "", Gauge, Number(1e300), 1e-300))]),
        ("foo:1|c|foo", &[Err(BadSampleRate)]),
        ("foo:1|c|0.5", &[Err(BadSampleRate)]),
        ("foo:1|c|@-1", &[Err(BadSampleRate)]),
        ("foo:1|c|@0", &[Err(BadSampleRate)]),
        ("foo:1|c|@", &[Err(BadSampleRate)]),
        ("foo:1|c|@x", &[Err(BadSampleRate)]),
        ("foo:1|c|#a|@x", &[Err(BadSampleRate)]),
        ("foo:-5|ms", &[Err(NegativeTimer)]),
        ("foo:x|g", &[Err(BadValue)]),
        ("foo:|g", &[Err(BadValue)]),
        ("foo:|ms", &[Err(BadValue)]),
        ("foo:3|zz", &[Err(UnknownType)]),
        ("foo:", &[Err(NoType)]),
        ("foo:1:", &[Err(NoType), Err(NoType)]),
    ];
    check(cases);
}

fn check(cases: &[(&str, &[Result<Want, ParseError>])]) {
    for (line, want) in cases {
        assert_eq!(parsed(line), *want, "line {line:?}");
    }
}

#[test]
fn recognises_events_and_service_checks() {
    assert!(matches!(parse_line(b"_e{5,4}:title|text|#a"), Line::Event));
    assert!(matches!(parse_line(b"_sc|db|0|m:ok"), Line::ServiceCheck));
}

#[test]
fn splits_packets_into_lines() {
    let packet = b"a:1|c\nb:2|ms\r\n\n\r\nc:3|g\nd:x|s";
    let got: Vec<&[u8]> = lines(packet).collect();
    assert_eq!(got, [&b"a:1|c"[..], b"b:2|ms", b"c:3|g", b"d:x|s"]);
}

#[test]
fn reads_the_timestamp() {
    let Line::Metrics(mut values) = parse_line(b"p:1|c|T1656581400") else { unreachable!() };
    assert_eq!(values.next().unwrap().unwrap().timestamp, Some(1_656_581_400));
}

#[test]
fn long_packed_lines_stay_linear() {
    // 20k packed values: each borrows the one type at the end without rescanning.
    let mut line = b"k:".to_vec();
    for _ in 0..20_000 {
        line.extend_from_slice(b"1:");
    }
    line.extend_from_slice(b"1|d");
    let Line::Metrics(values) = parse_line(&line) else { unreachable!() };
    assert_eq!(values.filter(Result::is_ok).count(), 20_001);
}
