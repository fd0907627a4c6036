//! Links the daemon with packed relative relocations (`-z pack-relative-relocs`, DT_RELR) when
//! the C toolchain and the C library can (GNU ld 2.38 or lld 15, glibc 2.36): the daemon's
//! ~36,000 relative relocations (OpenSSL linked in) then take 13 KB instead of 870 KB, which the
//! dynamic loader reads whole at every start and which stayed resident in every daemon
//! (`readelf -S`: `.relr.dyn` against `.rela.dyn`; issue 53). Elsewhere (an
//! older toolchain, a cross build, not Linux) the binary is linked as before.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=HISTD_PACK_RELOCS");
    if env::var("HISTD_PACK_RELOCS").is_ok_and(|value| value == "0") {
        return;
    }
    if packed_relocations_work() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// True when a C program linked with `-z pack-relative-relocs` links and runs here.
fn packed_relocations_work() -> bool {
    let (Ok(host), Ok(target)) = (env::var("HOST"), env::var("TARGET")) else { return false };
    if host != target || !target.contains("-linux-") {
        return false;
    }
    let Some(out) = env::var_os("OUT_DIR").map(PathBuf::from) else { return false };
    let (source, program) = (out.join("relr_probe.c"), out.join("relr_probe"));
    if std::fs::write(&source, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    let compiler = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let linked = Command::new(&compiler)
        .args(["-pie", "-fPIE", "-Wl,-z,pack-relative-relocs", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .is_ok_and(|output| output.status.success() && output.stderr.is_empty());
    linked && Command::new(&program).status().is_ok_and(|status| status.success())
}
