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

fn live_config(port: u16, extra: &str) -> String {
    format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: {port}, \
           flushInterval: 600000, backends: [], {extra} }}"
    )
}

/// The row of `name` in a live answer.
fn live_row<'a>(answer: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let rows = answer["series"].as_array().unwrap();
    rows.iter().find(|row| row["name"] == name).unwrap_or_else(|| panic!("no {name} in {answer}"))
}

/// Issue 49: `/api/v1/live` (what `histd top` shows) asked of a global with peers is the
/// group's interval so far: a timer two members hold has the bins, p50 and p99 of one histd fed
/// every sample; counters add; the busiest rows of the group are picked from the union and a
/// member that cut its list gives the rows it left out (`limit=1`: each member's busiest is
/// another series); `histd top --once` says how many members answered; a peer gone makes the
/// view partial, naming it.
#[test]
fn top_asked_of_one_global_shows_the_groups_interval() {
    let (port_a, port_b) = (free_port(), free_port());
    let b = Daemon::start("fleet-live-b", &live_config(port_b, ""));
    let peers = format!("global: {{ peers: ['http://127.0.0.1:{port_b}/'] }}");
    let a = Daemon::start("fleet-live-a", &live_config(port_a, &peers));
    let reference = Daemon::start("fleet-live-reference", &live_config(free_port(), ""));
    let (to_a, to_b) = (timers("fl.latency", 1..=100), timers("fl.latency", 101..=300));
    a.send_tcp(&format!("{to_a}fl.hits:3|c\nfl.a_busiest:48|c\n"));
    b.send_tcp(&format!("{to_b}fl.hits:4|c\nfl.hits:45|c\n"));
    reference.send_tcp(&format!("{to_a}{to_b}fl.hits:52|c\nfl.a_busiest:48|c\n"));
    for (daemon, lines) in [(&a, 102), (&b, 202), (&reference, 302)] {
        daemon.wait_received(lines);
    }
    let live = |daemon: &Daemon, query: &str| daemon.http_json(&format!("/api/v1/live?match=%5Efl%5C.&{query}"));
    let group = live(&a, "sort=value&threshold=150");
    let single = live(&reference, "sort=value&threshold=150");
    assert_eq!(group["partial"], false, "{group}");
    for field in ["value", "p50", "p99", "at_or_above", "bins"] {
        assert_eq!(live_row(&group, "fl.latency")[field], live_row(&single, "fl.latency")[field], "{field}: {group}");
    }
    assert_eq!(live_row(&group, "fl.hits")["value"], 52.0);
    assert_eq!(group["matched"], 3);

    // limit=2: a lists fl.latency and fl.a_busiest (48), leaving out its fl.hits (3); b lists
    // fl.latency and fl.hits (49). The group's two busiest are fl.latency and fl.hits, whole:
    // a is asked again for the fl.hits it left out (52, not 49).
    let top_two = live(&a, "sort=value&limit=2");
    let names: Vec<&str> =
        top_two["series"].as_array().unwrap().iter().map(|row| row["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fl.latency", "fl.hits"], "{top_two}");
    assert_eq!(
        (live_row(&top_two, "fl.latency")["value"].clone(), live_row(&top_two, "fl.hits")["value"].clone()),
        (300.0.into(), 52.0.into())
    );
    assert_eq!(top_two["truncated"], true);

    let top = |url: &str| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_histd"))
            .args(["top", "--once", "--interval", "0.1", "--width", "140", "--filter", "^fl\\.", "--url", url])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let screen = top(&format!("http://127.0.0.1:{port_a}"));
    assert!(screen.contains("group: 2 of 2 members answered"), "{screen}");
    let latency = screen.lines().find(|line| line.starts_with("fl.latency")).unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(latency.split_whitespace().nth(3), Some("300"), "{screen}");

    drop(b);
    let alone = live(&a, "sort=value");
    assert_eq!(alone["partial"], true, "{alone}");
    assert_eq!(live_row(&alone, "fl.latency")["value"], 100.0, "this global's part: {alone}");
    assert_eq!(alone["members"][1]["answered"], false, "{alone}");
    let screen = top(&format!("http://127.0.0.1:{port_a}"));
    assert!(screen.contains("group: 1 of 2 members answered (PARTIAL"), "{screen}");
    assert!(screen.contains(&format!("http://127.0.0.1:{port_b}: ")), "{screen}");
}
