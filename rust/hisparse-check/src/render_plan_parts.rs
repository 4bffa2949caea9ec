//! What both engines' capacity plans (render_plan.rs, render_plan_sglang.rs)
//! print the same way: numbers, token counts, the request cells, the sweep
//! table and the plan's last lines.

/// 1234567 -> "1,234,567".
pub(crate) fn n(x: u64) -> String {
    let digits = x.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Token counts as `--max-model-len` writes them: 128000 -> "128k" (k = 1000),
/// 131072 -> "128K" (K = 1024); decimal first, so 128k never prints as 125K.
pub(crate) fn tokens(t: u64) -> String {
    if t >= 1000 && t % 1000 == 0 {
        format!("{}k", t / 1000)
    } else if t >= 1024 && t % 1024 == 0 {
        format!("{}K", t / 1024)
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(n(0), "0");
        assert_eq!(n(1234567), "1,234,567");
        assert_eq!(n(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(tokens(131072), "128K");
        assert_eq!(tokens(128_000), "128k");
        assert_eq!(tokens(8192), "8K");
        assert_eq!(tokens(1_000_000), "1000k");
        assert_eq!(tokens(163_841), "163841");
    }
}
