//! `--plan --engine-log FILE` (both engines): the log read from a file or
//! standard input (`-`), and its section of the plan's text: what the plan
//! took from the log, and each logged figure beside the plan's.

use hisparse_core::engine_log::{EngineLog, EngineLogReport};
use std::fmt::Write;
use std::io::BufReader;

/// Reads the start-up log at `path` (`-`: standard input) for `engine`; Err
/// is the usage error to print (a file that cannot be opened, a log with none
/// of the engine's lines).
pub fn read(path: &str, engine: &str) -> Result<EngineLog, String> {
    if path == "-" {
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        return hisparse_core::engines::read_engine_log(engine, &mut lock, "-");
    }
    let file = std::fs::File::open(path)
        .map_err(|e| format!("--engine-log {path}: cannot open it: {e}"))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "--engine-log {path}: is a directory, not a log file"
        ));
    }
    let mut reader = BufReader::with_capacity(1 << 16, file);
    hisparse_core::engines::read_engine_log(engine, &mut reader, path)
}

/// A logged or computed figure: whole numbers with thousands separators.
fn figure(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        let digits = crate::render_plan_parts::n(x.abs() as u64);
        if x < 0.0 {
            format!("-{digits}")
        } else {
            digits
        }
    } else {
        format!("{x:.2}")
    }
}

/// The plan text's engine-log section (before its result line).
pub fn section(r: &EngineLogReport) -> String {
    let mut out = String::new();
    let engine = crate::dialect::of(&r.engine).name;
    let _ = writeln!(
        out,
        "\nengine log {} ({engine} start-up lines; {} lines read{}{}{})",
        r.path,
        crate::render_plan_parts::n(r.lines),
        if r.stopped_early {
            ", only its first GiB (the rest unread)"
        } else {
            ""
        },
        if r.lines_cut > 0 {
            format!(", {} cut at 64 KiB", r.lines_cut)
        } else {
            String::new()
        },
        if r.logged_hisparse {
            ", a launch with HiSparse"
        } else {
            ", a launch without HiSparse: the plan says what HiSparse would serve at its measured room"
        }
    );
    if r.measured.is_empty() {
        let _ = writeln!(
            out,
            "  measured          nothing the plan uses (no weights or KV-room line)"
        );
    }
    for (i, m) in r.measured.iter().enumerate() {
        let what = match m.input.as_str() {
            "weights_gib" => "weights",
            "available_kv_cache_gib" => "KV room",
            other => other,
        };
        let rank = m
            .figure
            .rank
            .as_deref()
            .map(|r| format!(", {r}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<17} {what} {:.2} GiB per GPU (line {}{rank}; {}; {})",
            if i == 0 { "measured" } else { "" },
            m.value,
            m.figure.line,
            m.rule,
            m.figure.source
        );
    }
    for c in &r.compared {
        // vLLM prints the concurrency as "%.2fx".
        let show = |x: f64| {
            if c.unit == "requests" && x.fract() != 0.0 || c.figure.starts_with("Maximum") {
                format!("{x:.2}")
            } else {
                figure(x)
            }
        };
        let computed = c.computed.map_or("?".to_owned(), show);
        let diff = match c.difference {
            Some(0.0) => "equal".to_owned(),
            Some(d) => format!("{}{}", if d > 0.0 { "+" } else { "" }, show(d)),
            None => "not computed".to_owned(),
        };
        let _ = writeln!(
            out,
            "  {}\n      the engine logged {} (line {}, {}), we compute {computed}: {diff}",
            c.figure,
            show(c.logged),
            c.line,
            c.source
        );
        if let Some(why) = &c.why {
            let _ = writeln!(out, "      {why}");
        }
    }
    out
}

/// `text` with `section` inserted before its last "result:" line.
pub fn insert_before_result(text: &str, section: &str) -> String {
    match text.rfind("\nresult:") {
        Some(i) => format!(
            "{}{}{}",
            &text[..i + 1],
            section.trim_start_matches('\n'),
            &text[i..]
        ),
        None => format!("{text}{section}"),
    }
}
