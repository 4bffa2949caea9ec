//! `hisparse-check` never panics, hangs or dies on a signal, whatever its argv
//! and environment: every run ends with exit status 0, 1 or 2, stderr has no
//! panic message, and `--json` output is JSON.
//!
//! The binary runs as a subprocess (`CARGO_BIN_EXE_hisparse-check`), so a
//! crash or a stack overflow fails one case instead of the test binary.
//! Inputs come from a fixed-seed generator (no proptest dependency), so runs
//! are deterministic; `HISPARSE_CLI_FUZZ_SEED` / `HISPARSE_CLI_FUZZ_CASES`
//! explore others. Temporary files go to the system temp directory.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_hisparse-check");
/// A run still going after this long is a hang: a debug build checks one
/// configuration in well under a second, and this bound is far above what a
/// loaded machine makes of that (a hang detector, not a speed target).
const HANG: Duration = Duration::from_secs(300);
const SEED: u64 = 0x4869_5370_6172_7365;
const CASES: usize = 300;

fn repo(rel: &str) -> String {
    format!("{}/../../{rel}", env!("CARGO_MANIFEST_DIR"))
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

fn run(args: &[String], v2_env: Option<&str>) -> Outcome {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("VLLM_USE_V2_MODEL_RUNNER")
        .env("RUST_BACKTRACE", "0");
    if let Some(v) = v2_env {
        cmd.env("VLLM_USE_V2_MODEL_RUNNER", v);
    }
    let mut child = cmd.spawn().expect("spawn hisparse-check");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break (Some(status), false);
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            break (child.wait().ok(), true);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Outcome {
        code: status.and_then(|s| s.code()),
        stdout: String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned(),
        timed_out,
    }
}

fn shown(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let a = if a.chars().count() > 200 {
                format!(
                    "{}...({} chars)",
                    a.chars().take(60).collect::<String>(),
                    a.chars().count()
                )
            } else {
                a.clone()
            };
            format!("{a:?}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run and return a description of what went wrong, if anything.
fn check(args: &[String], v2_env: Option<&str>) -> Option<String> {
    let o = run(args, v2_env);
    let what = if o.timed_out {
        Some(format!("no exit within {HANG:?}: a hang"))
    } else if !matches!(o.code, Some(0..=2)) {
        Some(format!(
            "exit status {:?} (101 = panic, None = killed by a signal)",
            o.code
        ))
    } else if o.stderr.contains("panicked") || o.stderr.contains("overflowed its stack") {
        Some("panic message on stderr".to_owned())
    } else if args.iter().any(|a| a == "--json")
        && matches!(o.code, Some(0 | 1))
        && serde_json::from_str::<serde_json::Value>(&o.stdout).is_err()
    {
        Some("--json output is not JSON".to_owned())
    } else {
        None
    };
    what.map(|w| {
        let tail: String = {
            let chars: Vec<char> = o.stderr.chars().collect();
            chars[chars.len().saturating_sub(600)..].iter().collect()
        };
        format!(
            "{w}\n  argv: {}\n  VLLM_USE_V2_MODEL_RUNNER: {v2_env:?}\n  stderr (tail): {tail}",
            shown(args)
        )
    })
}

fn assert_ok(args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    if let Some(problem) = check(&args, None) {
        panic!("{problem}");
    }
}

// ---------------------------------------------------------------------------
// A small deterministic generator.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // SplitMix64.
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len())]
    }
}

struct Fixtures {
    dir: PathBuf,
    models: Vec<String>,
    yamls: Vec<String>,
}

impl Fixtures {
    fn new() -> Self {
        let dir =
            std::env::temp_dir().join(format!("hisparse-cli-never-panics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).expect("write fixture");
            p.display().to_string()
        };
        let models = vec![
            repo("tests/data/models/deepseek-v3.2"),
            repo("tests/data/models/deepseek-v3.2/config.json"),
            repo("tests/data/models/glm-5"),
            repo("tests/data/models/deepseek-v4-flash"),
            repo("tests/data/models/llama-3.1-8b"),
            repo("tests/data/models"),
            repo("tests/data/models/does-not-exist"),
            write("not-json.json", "{\"index_topk\": 2048,"),
            write("list.json", "[1, 2, 3]"),
            write("empty.json", ""),
            write("deep.json", &"[".repeat(100_000)),
            "/dev/null".to_owned(),
            String::new(),
        ];
        let model = repo("tests/data/models/deepseek-v3.2");
        let yamls = vec![
            repo("examples/dsv32-decode-pd.yaml"),
            write(
                "flags.yaml",
                &format!(
                    "model: {model}\nmax_model_len: 128k\nno-scheduler-reserve-full-isl: true\nscheduler_reserve_full_isl: false\n\
                     disable-hybrid-kv-cache-manager: false\nkv-transfer-config:\n  kv_connector: HiSparseConnector\n  kv_role: kv_both\n\
                     attention-config: {{hisparse_config: {{device_buffer_size: 4096}}}}\nblock-size: null\nkv-cache-dtype: [fp8, auto]\n"
                ),
            ),
            write("bad.yaml", "model: [unclosed\n  - x: {"),
            write("list.yaml", "- --model\n- x\n"),
            write("scalar.yaml", "42\n"),
            write("empty.yaml", ""),
            write("unicode.yaml", "\"é🦀\": \"\\u0000\"\nmodel: 5\n"),
            write("nested.yaml", &format!("hf-overrides: {}1{}\n", "[".repeat(200), "]".repeat(200))),
            write("flags.txt", "model: x\n"),
            dir.join("missing.yaml").display().to_string(),
        ];
        Fixtures { dir, models, yamls }
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const HISPARSE: &str = r#"{"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}}"#;

const KV_JSON: &[&str] = &[
    HISPARSE,
    r#"{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{"host_pool_gib":128}}]}}"#,
    r#"[{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"HiSparseConnector","kv_role":"kv_both"}]"#,
    r#"{"kv_connector":"MultiConnector","connectors":[{"kv_connector":"HiSparseConector"}]}"#,
    r#"{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{"host_pool_gib":"$POOL"}}"#,
    r#"{"kv_connector":"HiSparseConnector","kv_role":"kv_both","kv_connector_extra_config":{"host_pool_gib":1e308}}"#,
    r#"{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":null}}"#,
    "null",
    "[]",
    "{}",
    "42",
    "\"x\"",
    "{",
    "{'kv_role': 'kv_both'}",
    "",
    " ",
];

const OTHER_JSON: &[&str] = &[
    r#"{"hisparse_config": {}}"#,
    r#"{"hisparse_config": {"device_buffer_size": 4097, "eager_host_mirror": "yes"}}"#,
    r#"{"hisparse_config": null}"#,
    r#"{"hisparse_config": "x"}"#,
    r#"{"method": "mtp", "num_speculative_tokens": 3}"#,
    r#"{"num_speculative_tokens": 4294967296}"#,
    r#"{"cudagraph_mode": "FULL"}"#,
    r#"{"cudagraph_mode": 7}"#,
    r#"{"index_topk": 0}"#,
    r#"{"max_position_embeddings": 18446744073709551615}"#,
    r#"{"num_hidden_layers": 4294967295, "index_topk": 4294967295}"#,
    r#"{"architectures": ["DeepseekV4ForCausalLM"]}"#,
    "null",
    "[1]",
    "{}",
    "{\"a\": ",
    "1e999",
    "\"\\ud800\"",
    "é",
];

/// Numbers for numeric flags: the first [`PLAUSIBLE_NUMBERS`] parse, the rest are odd.
const NUMBERS: &[&str] = &[
    "1",
    "8",
    "0",
    "-1",
    "2",
    "64",
    "63",
    "128",
    "1k",
    "1K",
    "128k",
    "128K",
    "25.6k",
    "auto",
    "163840",
    "163841",
    "1000000",
    "4096",
    "-2",
    "1.5K",
    "1m",
    "1g",
    "AUTO",
    " 4096 ",
    "abc",
    "",
    "1e3",
    "0x10",
    "٤٠٩٦",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "99999999999999999999",
    "10000000",
    "1000t",
    "300t",
    "9.3e18",
    "8T",
];
const PLAUSIBLE_NUMBERS: usize = 18;

const DTYPES: &[&str] = &[
    "auto",
    "fp8",
    "fp8_ds_mla",
    "bfloat16",
    "nvfp4_ds_mla",
    "fp9",
    "",
    "$DTYPE",
];

const JUNK: &[&str] = &[
    "--",
    "-",
    "--unknown",
    "---x",
    "-x",
    "é",
    "--=",
    "--model=",
    "=",
    "-tpx",
    "-tp=2",
    "--kv-transfer-config.",
    "--kv-transfer-config..x",
    "--x.y=1",
    "--.a",
    "--kv_transfer_config",
    "--config",
    "--config=",
    "--json",
    "--no-json",
];

fn json_flag(rng: &mut Rng, hostile: bool) -> Vec<String> {
    let flag = rng.pick(&[
        "--kv-transfer-config",
        "--kv_transfer_config",
        "--attention-config",
        "--speculative-config",
        "--compilation-config",
        "-cc",
        "--hf-overrides",
    ]);
    let kv = flag.contains("kv");
    let value = match (kv, hostile) {
        (true, false) => rng.pick(&KV_JSON[..3]),
        (true, true) => rng.pick(KV_JSON),
        (false, false) => rng.pick(&OTHER_JSON[..8]),
        (false, true) => rng.pick(OTHER_JSON),
    };
    let mut value = value.to_owned();
    if hostile && rng.chance(10) && !value.is_empty() {
        // A truncated flag value (a quoting mistake in a launch script).
        let mut cut = rng.below(value.len());
        while !value.is_char_boundary(cut) {
            cut -= 1;
        }
        value.truncate(cut);
    }
    if rng.chance(30) {
        vec![format!("{flag}={value}")]
    } else {
        vec![flag.to_owned(), value]
    }
}

fn dotted_flag(rng: &mut Rng, hostile: bool) -> Vec<String> {
    let name = rng.pick(
        &[
            "--kv-transfer-config.kv_connector",
            "--kv-transfer-config.kv_role",
            "--kv_transfer_config.kv_connector_extra_config.host_pool_gib",
            "--attention-config.hisparse_config.device_buffer_size",
            "-cc.cudagraph_mode",
            "--hf-overrides.index_topk",
            "--speculative-config.num_speculative_tokens",
            // The rest only in hostile runs.
            "--kv-transfer-config.kv_connector_extra_config.connectors+",
            "--kv-transfer-config.kv_connector_extra_config.connectors",
            "--attention-config.hisparse_config",
            "--compilation-config.cudagraph_mode",
            "--hf-overrides.text_config.index_topk",
            "--max-model-len.x",
            "--model.a",
        ][..if hostile { 14 } else { 7 }],
    );
    let value = match (rng.below(4), hostile) {
        (0, false) => rng.pick(&NUMBERS[..PLAUSIBLE_NUMBERS]).to_owned(),
        (0, true) => rng.pick(NUMBERS).to_owned(),
        (_, false) => rng
            .pick(&[
                "HiSparseConnector",
                "kv_both",
                "FULL",
                "64",
                "128g",
                "4096",
                "2",
            ])
            .to_owned(),
        (1, true) => rng
            .pick(&[
                "HiSparseConnector",
                "kv_both",
                "FULL",
                "a,b",
                "",
                "{}",
                "[1,2]",
                "null",
                "true",
                "64g",
                "$POOL",
            ])
            .to_owned(),
        (2, true) => rng.pick(KV_JSON).to_owned(),
        _ => rng.pick(OTHER_JSON).to_owned(),
    };
    if rng.chance(30) {
        vec![format!("{name}={value}")]
    } else if hostile && rng.chance(5) {
        vec![name.to_owned()] // no value follows
    } else {
        vec![name.to_owned(), value]
    }
}

/// One argv: plausible (a real model, well-formed flags, values that are
/// often wrong but parse) or, one time in three, hostile (bad files, junk
/// arguments, truncated JSON, odd numbers).
fn argv(rng: &mut Rng, fx: &Fixtures) -> Vec<String> {
    let hostile = rng.chance(35);
    let mut args = Vec::new();
    if !hostile || rng.chance(85) {
        let models = if hostile { fx.models.len() } else { 5 };
        let model = fx.models[rng.below(models)].clone();
        match rng.below(3) {
            0 => args.push(model),
            1 => args.extend(["--model".to_owned(), model]),
            _ => args.push(format!("--model={model}")),
        }
    }
    if !hostile && rng.chance(70) {
        // Most plausible runs configure HiSparse.
        args.extend([
            "--kv-transfer-config".to_owned(),
            rng.pick(&KV_JSON[..2]).to_owned(),
        ]);
    }
    for _ in 0..rng.below(if hostile { 7 } else { 5 }) {
        match rng.below(10) {
            0..=2 => args.extend(json_flag(rng, hostile)),
            3 | 4 => args.extend(dotted_flag(rng, hostile)),
            5 | 6 => {
                let flag = rng.pick(&[
                    "-tp",
                    "--tensor-parallel-size",
                    "-pp",
                    "-dp",
                    "-dcp",
                    "--block-size",
                    "--block_size",
                    "--max-model-len",
                    "--max_model_len",
                    "--max-num-seqs",
                ]);
                let n = if hostile {
                    rng.pick(NUMBERS)
                } else {
                    rng.pick(&NUMBERS[..PLAUSIBLE_NUMBERS])
                };
                if rng.chance(30) {
                    args.push(format!("{flag}={n}"));
                } else {
                    args.extend([flag.to_owned(), n.to_owned()]);
                }
            }
            7 if rng.chance(40) => {
                // The capacity planner and the vLLM flags it reads.
                args.push("--plan".to_owned());
                let flag = rng.pick(&[
                    "--context-length",
                    "--target-requests",
                    "--host-memory-gib",
                    "--gpu-memory-gib",
                    "--weights-gib",
                    "--kv-cache-memory-bytes",
                    "--gpu-memory-utilization",
                ]);
                let n = if hostile {
                    rng.pick(NUMBERS)
                } else {
                    rng.pick(&NUMBERS[..PLAUSIBLE_NUMBERS])
                };
                args.extend([flag.to_owned(), n.to_owned()]);
            }
            7 => args.push(
                rng.pick(&[
                    "--scheduler-reserve-full-isl",
                    "--no-scheduler-reserve-full-isl",
                    "--disable-hybrid-kv-cache-manager",
                    "--no-disable-hybrid-kv-cache-manager",
                    "--json",
                    "--json",
                ])
                .to_owned(),
            ),
            8 => {
                if rng.chance(50) {
                    args.extend(["--kv-cache-dtype".to_owned(), rng.pick(DTYPES).to_owned()]);
                } else {
                    args.extend([
                        "--platform".to_owned(),
                        rng.pick(&["cuda", "rocm", "cpu", "tpu", ""]).to_owned(),
                    ]);
                }
            }
            _ if hostile => {
                if rng.chance(50) {
                    let yaml = fx.yamls[rng.below(fx.yamls.len())].clone();
                    if rng.chance(50) {
                        args.extend(["--config".to_owned(), yaml]);
                    } else {
                        args.push(format!("--config={yaml}"));
                    }
                } else {
                    args.push(rng.pick(JUNK).to_owned());
                }
            }
            _ => args.extend(["--config".to_owned(), fx.yamls[rng.below(2)].clone()]),
        }
    }
    if hostile && rng.chance(5) {
        args.push(rng.pick(&["--help", "--version", "-h", "-V"]).to_owned());
    }
    // Flag order must not matter for robustness.
    if hostile && args.len() > 2 && rng.chance(30) {
        let i = rng.below(args.len());
        let j = rng.below(args.len());
        args.swap(i, j);
    }
    args
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// Random argv from flags, values and files that exercise every parsing path.
#[test]
fn random_argv_never_panics() {
    let fx = Fixtures::new();
    let mut rng = Rng(env_number("HISPARSE_CLI_FUZZ_SEED").unwrap_or(SEED));
    let cases = env_number("HISPARSE_CLI_FUZZ_CASES").map_or(CASES, |n| n as usize);
    let mut problems = Vec::new();
    for _ in 0..cases {
        let args = argv(&mut rng, &fx);
        let v2 = if rng.chance(15) {
            Some(rng.pick(&["1", "0", "", "yes", " 1", "-0", "99999999999999999999"]))
        } else {
            None
        };
        if let Some(p) = check(&args, v2) {
            problems.push(p);
            if problems.len() >= 5 {
                break;
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} failing run(s):\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

#[test]
fn documented_examples_never_panic() {
    let model = repo("tests/data/models/deepseek-v3.2");
    assert_ok(&["--config", &repo("examples/dsv32-decode-pd.yaml")]);
    assert_ok(&["--config", &repo("examples/dsv32-decode-pd.yaml"), "--json"]);
    assert_ok(&[
        &model,
        "--kv-transfer-config",
        HISPARSE,
        "--max-model-len",
        "128k",
        "--json",
    ]);
    assert_ok(&[&model, "--kv-transfer-config", HISPARSE, "--plan", "--json"]);
    assert_ok(&[
        &model,
        "--kv-transfer-config",
        HISPARSE,
        "--plan",
        "--gpu-memory-gib",
        "140",
        "-tp",
        "8",
        "--context-length",
        "1M",
        "--host-memory-gib",
        "1",
    ]);
    assert_ok(&["--help"]);
    assert_ok(&["--version"]);
    assert_ok(&[]);
}

/// A JSON flag nested deeper than serde_json's recursion limit is an
/// `invalid_json` error, not a crash.
#[test]
fn deeply_nested_json_flag_is_an_error_not_a_crash() {
    let model = repo("tests/data/models/deepseek-v3.2");
    let deep = "[".repeat(100_000);
    assert_ok(&[&model, "--hf-overrides", &deep]);
    let deep_obj = "{\"a\":".repeat(20_000) + "1" + &"}".repeat(20_000);
    assert_ok(&[&model, "--kv-transfer-config", &deep_obj]);
}

// ---------------------------------------------------------------------------
// Minimal reproductions of what the generator found.

/// Hung: `min_pool_gib` (hisparse-core engines/vllm_0_33/validate.rs) did not terminate
/// when the host pool needed exceeds ~2^64 bytes (max_model_len > ~2.6e14
/// tokens with DeepSeek-V3.2).
#[test]
fn regression_huge_max_model_len_does_not_hang() {
    let model = repo("tests/data/models/deepseek-v3.2");
    assert_ok(&[
        &model,
        "--kv-transfer-config",
        HISPARSE,
        "--max-model-len",
        "300t",
    ]);
}

/// Panics in debug builds (u64 overflow in `ceil(max_model_len / block_size) + 2`).
#[test]
fn regression_max_position_embeddings_u64_max_does_not_panic() {
    let model = repo("tests/data/models/deepseek-v3.2");
    assert_ok(&[
        &model,
        "--kv-transfer-config",
        HISPARSE,
        "--block-size",
        "1",
        "--hf-overrides",
        r#"{"max_position_embeddings": 18446744073709551615}"#,
    ]);
}

/// Stack overflow (SIGABRT) in debug and release: dotted flags build a JSON
/// value as deep as the flag name, and argv.rs `merge` (also `to_string` and
/// `Drop` in debug) recurse once per level. Two 20,000-level flags with a
/// common prefix (two 40 KB arguments) abort a release build.
#[test]
fn regression_deep_dotted_flags_do_not_overflow_the_stack() {
    let name = format!("--hf-overrides.{}", vec!["a"; 20_000].join("."));
    assert_ok(&[&format!("{name}.b"), "1", &format!("{name}.c"), "2"]);
}

/// The Rust binary cannot draw: `--plot` is a usage error that names the
/// Python console script, never a silent no-op.
#[test]
fn plot_needs_the_python_entry_point() {
    let args: Vec<String> = [
        &repo("tests/data/models/deepseek-v3.2"),
        "--kv-transfer-config",
        HISPARSE,
        "--plan",
        "--plot",
        "plan.png",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let o = run(&args, None);
    assert_eq!(o.code, Some(2));
    assert!(
        o.stderr.contains("pip install 'hisparse_rs[plot]'")
            && o.stderr
                .contains("from a checkout of this repository: pip install '.[plot]'"),
        "{}",
        o.stderr
    );
}

// ---------------------------------------------------------------------------
// Hostile files, huge numbers and an unwritable stdout (issue 10). Each probe
// runs under the same 5 s watchdog: a FIFO that blocked the open, /dev/zero
// read to exhaustion or a divisor search counting down from -tp would hang.

/// A fresh directory under the system temp directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hisparse-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

/// An error exit (2) within the watchdog whose message contains `needle`.
fn assert_refused(args: &[&str], needle: &str) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    if let Some(problem) = check(&args, None) {
        panic!("{problem}");
    }
    let o = run(&args, None);
    assert_eq!(o.code, Some(2), "{}\n{}", shown(&args), o.stderr);
    assert!(o.stderr.contains(needle), "{}: {}", shown(&args), o.stderr);
}

#[test]
fn config_files_that_are_not_regular_files_are_refused() {
    let model = repo("tests/data/models/deepseek-v3.2");
    let dir = scratch("fifo");
    let fifo = dir.join("serve.yaml");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    assert_refused(&[&model, "--config", fifo], "FIFO");
    let zero = dir.join("zero.yaml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    assert_refused(
        &[&model, "--config", zero.to_str().unwrap()],
        "character device",
    );
    // A model config.json that is a FIFO or a device: refused as such, not "not found".
    let model_dir = dir.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    mkfifo(&model_dir.join("config.json"));
    assert_refused(
        &[
            model_dir.to_str().unwrap(),
            "--kv-transfer-config",
            HISPARSE,
        ],
        "FIFO",
    );
    assert_refused(
        &["/dev/zero", "--kv-transfer-config", HISPARSE],
        "character device",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_over_their_bound_are_refused_unread() {
    let dir = scratch("huge");
    // Sparse files: the size is checked before a byte is read.
    let yaml = dir.join("serve.yaml");
    std::fs::File::create(&yaml)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    let model = repo("tests/data/models/deepseek-v3.2");
    assert_refused(
        &[&model, "--config", yaml.to_str().unwrap()],
        "bytes read at most",
    );
    let config = dir.join("config.json");
    std::fs::File::create(&config)
        .unwrap()
        .set_len(200 << 20)
        .unwrap();
    assert_refused(
        &[config.to_str().unwrap(), "--kv-transfer-config", HISPARSE],
        "bytes read at most",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn yaml_tags_outside_safe_load_are_refused_and_inf_is_not_null() {
    let model = repo("tests/data/models/deepseek-v3.2");
    let dir = scratch("yaml");
    let yaml = dir.join("serve.yaml");
    std::fs::write(
        &yaml,
        "kv-transfer-config: !!python/object/apply:os.system [id]\n",
    )
    .unwrap();
    assert_refused(
        &[&model, "--config", yaml.to_str().unwrap()],
        "!!python/object/apply:os.system",
    );
    std::fs::write(
        &yaml,
        "kv-transfer-config:\n  kv_connector: HiSparseConnector\n  kv_role: kv_both\n  kv_connector_extra_config:\n    host_pool_gib: .inf\n",
    )
    .unwrap();
    let args: Vec<String> = [model.as_str(), "--config", yaml.to_str().unwrap(), "--json"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let o = run(&args, None);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let errors = report["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|e| e["code"] == "invalid_value"
            && e["path"] == "kv_transfer_config.kv_connector_extra_config.host_pool_gib"
            && e["given"] == "inf"),
        "{}",
        o.stdout
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn huge_inputs_cost_what_their_output_needs() {
    let model = repo("tests/data/models/deepseek-v3.2");
    // The heads/TP fix searches divisors of the heads, not every size below -tp.
    let args = [
        model.as_str(),
        "--kv-transfer-config",
        HISPARSE,
        "-tp",
        "2305843009213693950",
        "--hf-overrides",
        r#"{"num_attention_heads": 2305843009213693951}"#,
        "--json",
    ];
    assert_ok(&args);
    let o = run(
        &args.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
        None,
    );
    assert!(
        o.stdout.contains("tensor_parallel_heads_mismatch"),
        "{}",
        o.stdout
    );
    // A 120 KB unknown flag (argv caps one argument at 128 KiB; run_cli from
    // Python takes longer ones): no "did you mean" search over it.
    let long = format!("--{}", "x".repeat(120_000));
    assert_refused(&[&model, &long], "unrecognized flag");
}

#[test]
fn an_unwritable_stdout_is_an_error_exit() {
    let model = repo("tests/data/models/deepseek-v3.2");
    for extra in [
        &[][..],
        &["--json"][..],
        &["--plan", "--host-memory-gib", "2048"][..],
        &["--help"][..],
    ] {
        let out = Command::new(BIN)
            .args([model.as_str(), "--kv-transfer-config", HISPARSE])
            .args(extra)
            .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot write the result to stdout"),
            "{extra:?}: {err}"
        );
    }
}

/// `hisparse-check ... | head -3`: a reader that closed the pipe is not an
/// error (it printed "cannot write the result to stdout: Broken pipe" and
/// exited 2); quiet, and the exit status is still the verdict (0 valid, 1
/// invalid), so `set -o pipefail` sees an invalid configuration. The read end
/// is closed before the child starts, so its first write fails with EPIPE.
#[test]
fn a_closed_pipe_is_quiet() {
    use std::os::unix::io::FromRawFd;
    let model = repo("tests/data/models/deepseek-v3.2");
    for (extra, code) in [
        (&[][..], 0),
        (&["--json"][..], 0),
        (&["--help"][..], 0),
        (&["-tp", "3"][..], 1),
        (&["-tp", "3", "--json"][..], 1),
    ] {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into `fds`; each is owned once below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors from pipe(), owned by nothing else.
        let (reader, writer) = unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        drop(reader);
        let out = Command::new(BIN)
            .args([model.as_str(), "--kv-transfer-config", HISPARSE])
            .args(extra)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{extra:?}: {err}");
        assert!(err.is_empty(), "{extra:?}: {err}");
    }
}

/// An argument that is not UTF-8 (a Latin-1 directory name) was replaced
/// lossily and reported as "model config not found", with the advice to pass
/// a config.json that exists: now a usage error that says what is wrong.
#[test]
fn an_argument_that_is_not_utf8_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch("latin1");
    let model = dir.join(std::ffi::OsStr::from_bytes(b"mod\xe8le"));
    std::fs::create_dir_all(&model).unwrap();
    std::fs::copy(
        repo("tests/data/models/deepseek-v3.2/config.json"),
        model.join("config.json"),
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg(&model)
        .args(["--kv-transfer-config", HISPARSE])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("argument 1") && err.contains("not UTF-8"),
        "{err}"
    );
    assert!(!err.contains("not found"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
