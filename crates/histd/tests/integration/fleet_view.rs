//! Issue 49, item 3: any global answers for its group. Two globals each hold part of the
//! fleet's series (here fed directly); one of them lists the other in `global.peers`: its
//! histogram, heatmap and series list are the group's, exactly (the histogram bin for bin that
//! of one histd fed everything), each saying `"partial": false` and naming its members; with
//! the peer gone, the same answers say `"partial": true` and why, and hold this global's part.

use circllhist::Histogram;

use crate::harness::{eventually, free_port, Daemon};

fn store_config(port: u16, extra: &str) -> String {
    format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: {port}, \
           flushInterval: 200, backends: ['store'], store: {{ dataDir: '$DIR/store' }}, {extra} }}"
    )
}

fn timers(name: &str, values: std::ops::RangeInclusive<u32>) -> String {
    values.map(|value| format!("{name}:{value}.5|ms\n")).collect()
}

fn histogram_of(answer: &serde_json::Value) -> Histogram {
    answer["circllhist"].as_str().map_or_else(Histogram::new, |h| Histogram::from_base64(h).unwrap())
}

#[test]
fn a_global_with_peers_answers_for_its_group_and_says_when_a_member_is_missing() {
    let (port_a, port_b) = (free_port(), free_port());
    let b = Daemon::start("fleet-view-b", &store_config(port_b, ""));
    let a = Daemon::start(
        "fleet-view-a",
        &store_config(port_a, &format!("global: {{ peers: ['http://127.0.0.1:{port_b}/'] }}")),
    );
    let reference = Daemon::start("fleet-view-reference", &store_config(free_port(), ""));
    let (to_a, to_b) = (timers("fv.latency", 1..=100), timers("fv.latency", 101..=300));
    a.send_tcp(&format!("{to_a}fv.hits:3|c\n"));
    b.send_tcp(&format!("{to_b}fv.hits:4|c\nonly.b:1|c\n"));
    reference.send_tcp(&format!("{to_a}{to_b}fv.hits:7|c\nonly.b:1|c\n"));
    let histogram = |daemon: &Daemon| daemon.http_json("/api/v1/histogram?name=fv.latency&from=-5m");
    assert!(eventually(|| histogram(&reference)["count"] == 300.0 && histogram(&b)["count"] == 200.0));
    assert!(eventually(|| histogram(&a)["count"] == 300.0), "{}", histogram(&a));

    let group = histogram(&a);
    assert_eq!(histogram_of(&group), histogram_of(&histogram(&reference)), "bin for bin: {group}");
    assert_eq!((group["sum"].clone(), group["min"].clone(), group["max"].clone()), {
        let single = histogram(&reference);
        (single["sum"].clone(), single["min"].clone(), single["max"].clone())
    });
    assert_eq!(group["partial"], false, "{group}");
    let members = group["members"].as_array().unwrap();
    assert!(members.len() == 2 && members.iter().all(|m| m["answered"] == true), "{group}");
    assert_eq!(members[1]["url"], format!("http://127.0.0.1:{port_b}"), "{group}");
    // A peer asked with `local=1` answers for itself alone, without members.
    let own = b.http_json("/api/v1/histogram?name=fv.latency&from=-5m&local=1");
    assert!(own["count"] == 200.0 && own.get("members").is_none(), "{own}");

    let heatmap = a.http_json("/api/v1/heatmap?name=fv.latency&from=-5m&step=1h");
    let counted: u64 = heatmap["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|step| step["bins"].as_array().unwrap().iter())
        .map(|bin| bin[2].as_u64().unwrap())
        .sum();
    assert!(counted == 300 && heatmap["partial"] == false, "{heatmap}");
    let series = a.http_json("/api/v1/series?match=*");
    let names: Vec<&str> = series["series"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert!(names.contains(&"only.b") && names.iter().filter(|n| **n == "fv.latency").count() == 1, "{series}");

    // The query language: each step's rows merged across members, then the function applied.
    let points = |daemon: &Daemon, expr: &str| {
        let answer =
            daemon.http_json(&format!("/api/v1/query?expr={}&from=-5m&step=1h", crate::harness::url_encode(expr)));
        (answer["points"].clone(), answer["partial"].clone())
    };
    for expr in [
        "quantile(fv.latency, 0.99)",
        "quantile(fv.latency, 0.5)",
        "sum(fv.hits)",
        "count(fv.latency)",
        "mean(fv.latency)",
        "max(fv.latency)",
        "inverse_quantile(fv.latency, 150)",
        "cumulative(sum(fv.hits))",
    ] {
        let (group, partial) = points(&a, expr);
        let (single, _) = points(&reference, expr);
        assert_eq!(group, single, "{expr}: the group's answer is the single histd's");
        assert_eq!(partial, false, "{expr}");
    }
    let (own, _) = points(&a, "sum(fv.hits)");
    assert_eq!(own[0][1], 7.0, "3 on one member, 4 on the other");
    a.send_tcp("fv.gauge:5|g\n");
    assert!(eventually(|| points(&a, "value(fv.gauge)").0.as_array().is_some_and(|p| !p.is_empty())));
    assert_eq!(points(&a, "value(fv.gauge)").1, true, "a gauge's value is this global's alone: partial");

    drop(b);
    let alone = histogram(&a);
    assert_eq!(alone["partial"], true, "{alone}");
    assert_eq!(alone["count"], 100.0, "this global's part: {alone}");
    let missing = &alone["members"][1];
    assert!(missing["answered"] == false && missing["error"].as_str().is_some_and(|e| !e.is_empty()), "{alone}");
}
