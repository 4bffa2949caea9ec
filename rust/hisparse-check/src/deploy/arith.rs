//! `$((EXPR))` in a `sh -c` string, as POSIX sh evaluates the integer
//! expressions manifests use (`--data-parallel-start-rank
//! $((LWS_WORKER_INDEX * 8))`): decimal integers, variable names (with or
//! without `$`) from the env, `+ - * / %`, unary `-` `+`, parentheses, in
//! 64-bit signed arithmetic. Anything else (comparisons, assignments,
//! bit operators, hex) is an error naming it; so are division by zero and
//! overflow.

use std::collections::BTreeMap;

struct P<'a> {
    t: Vec<char>,
    i: usize,
    env: &'a BTreeMap<String, String>,
    depth: usize,
}

fn bad(what: &str) -> String {
    format!("the sh -c string's $((...)) uses {what}, which hisparse-check does not evaluate (it reads + - * / % on integers and variables)")
}

impl P<'_> {
    fn ws(&mut self) {
        while self.t.get(self.i).is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.ws();
        self.t.get(self.i).copied()
    }

    fn expr(&mut self) -> Result<i64, String> {
        let mut v = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.i += 1;
            let r = self.term()?;
            v = if op == '+' {
                v.checked_add(r)
            } else {
                v.checked_sub(r)
            }
            .ok_or_else(|| bad("a result beyond 64 bits"))?;
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<i64, String> {
        let mut v = self.unary()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.i += 1;
            let r = self.unary()?;
            v = match op {
                '*' => v.checked_mul(r),
                _ if r == 0 => return Err(bad("a division by zero")),
                '/' => v.checked_div(r),
                _ => v.checked_rem(r),
            }
            .ok_or_else(|| bad("a result beyond 64 bits"))?;
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<i64, String> {
        match self.peek() {
            Some('-') => {
                self.i += 1;
                self.unary()?
                    .checked_neg()
                    .ok_or_else(|| bad("a result beyond 64 bits"))
            }
            Some('+') => {
                self.i += 1;
                self.unary()
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<i64, String> {
        match self.peek() {
            Some('(') => {
                self.depth += 1;
                if self.depth > 64 {
                    return Err(bad("parentheses nested deeper than 64"));
                }
                self.i += 1;
                let v = self.expr()?;
                if self.peek() != Some(')') {
                    return Err(bad("an unclosed `(`"));
                }
                self.i += 1;
                self.depth -= 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.i;
                while self.t.get(self.i).is_some_and(char::is_ascii_alphanumeric) {
                    self.i += 1;
                }
                let text: String = self.t[start..self.i].iter().collect();
                if text.len() > 1 && text.starts_with('0')
                    || !text.chars().all(|c| c.is_ascii_digit())
                {
                    return Err(bad(&format!("`{text}` (octal or hex)")));
                }
                text.parse().map_err(|_| bad("a number beyond 64 bits"))
            }
            Some(c) if c == '$' || c == '_' || c.is_ascii_alphabetic() => {
                if c == '$' {
                    self.i += 1;
                }
                let start = self.i;
                while self
                    .t
                    .get(self.i)
                    .is_some_and(|c| *c == '_' || c.is_ascii_alphanumeric())
                {
                    self.i += 1;
                }
                let name: String = self.t[start..self.i].iter().collect();
                let Some(value) = self.env.get(&name) else {
                    return Err(format!("the sh -c string's $((...)) uses {name}, which the container's env does not set"));
                };
                let value = value.trim();
                if value.is_empty() {
                    return Ok(0);
                }
                value.parse().map_err(|_| format!("the sh -c string's $((...)) uses {name}, whose value {value:?} is not an integer"))
            }
            Some(c) => Err(bad(&format!("`{c}`"))),
            None => Err(bad("an empty operand")),
        }
    }
}

/// The value of `expr` (the text inside `$((` `))`).
pub fn eval(expr: &str, env: &BTreeMap<String, String>) -> Result<i64, String> {
    let mut p = P {
        t: expr.chars().collect(),
        i: 0,
        env,
        depth: 0,
    };
    let v = p.expr()?;
    match p.peek() {
        None => Ok(v),
        Some(c) => Err(bad(&format!("`{c}`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_expressions() {
        let env: BTreeMap<String, String> = [
            ("I".to_owned(), "2".to_owned()),
            ("E".to_owned(), String::new()),
        ]
        .into();
        assert_eq!(eval("I * 8", &env), Ok(16));
        assert_eq!(eval(" $I*8+1 ", &env), Ok(17));
        assert_eq!(eval("-(I - 5) % 2", &env), Ok(1));
        assert_eq!(eval("7 / 2 - E", &env), Ok(3));
        for (e, named) in [
            ("1 / 0", "division by zero"),
            ("I == 2", "`=`"),
            ("0x10", "hex"),
            ("X + 1", "does not set"),
            ("(1", "unclosed"),
            ("9223372036854775807 + 1", "64 bits"),
            ("", "empty"),
        ] {
            let err = eval(e, &env).unwrap_err();
            assert!(err.contains(named), "{e}: {err}");
        }
    }
}
