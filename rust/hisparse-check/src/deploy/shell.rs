//! A container's `sh -c 'STRING'` split into the argv the shell would exec,
//! as POSIX sh reads one simple command (XCU 2.2 quoting, 2.6.2 parameter
//! expansion, 2.6.5 field splitting with the default IFS): single quotes
//! literal; double quotes where `\` escapes only `$` `` ` `` `"` `\` and
//! newline; `\`-newline removed everywhere but inside single quotes; `#`
//! starting a word begins a comment; `$NAME` / `${NAME}` from the container's
//! env (unquoted: split on blanks); leading `NAME=value` words are the
//! command's own env; a leading `exec` is the command itself.
//!
//! What we cannot read is an error naming it, never a guess: pipes and lists
//! (`|`, `&&`, `||`, `;`, `&`, a second command on a new line), redirections,
//! `$(cmd)` and backquotes, arithmetic beyond `arith.rs`'s, `${NAME:-x}` and the other
//! operators, positional and special parameters, unquoted glob characters
//! and `~`, and a `$NAME` the container's env does not set.

use std::collections::BTreeMap;

/// Longest `sh -c` string read (bytes); longer is its own error.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// The command a `sh -c` string runs.
#[derive(Debug, PartialEq, Eq)]
pub struct Command {
    /// The words exec'd, after quote removal and expansion.
    pub argv: Vec<String>,
    /// `NAME=value` words before the command: the command's own env.
    pub env: Vec<(String, String)>,
}

struct Splitter<'a> {
    chars: Vec<char>,
    i: usize,
    env: &'a BTreeMap<String, String>,
    words: Vec<String>,
    word: String,
    /// The current word has begun (an empty `""` is still a word).
    started: bool,
}

fn cannot(what: &str) -> String {
    format!("the sh -c string uses {what}, which hisparse-check does not evaluate: give the launch as command/args words, or as one simple command (quotes, $VAR, \\-newlines)")
}

impl Splitter<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn end_word(&mut self) {
        if self.started {
            self.words.push(std::mem::take(&mut self.word));
            self.started = false;
        }
    }

    fn run(&mut self) -> Result<(), String> {
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                ' ' | '\t' => self.end_word(),
                '\n' => {
                    self.end_word();
                    self.rest_is_blank()?;
                }
                '\\' => match self.peek(0) {
                    Some('\n') => self.i += 1,
                    Some(n) => {
                        self.i += 1;
                        self.push(n);
                    }
                    // A backslash ending the script is kept as itself, as
                    // dash and bash keep it (`sh -c 'echo a \'` prints `a \`).
                    None => self.push('\\'),
                },
                '\'' => self.single()?,
                '"' => self.double()?,
                '$' => self.dollar(false)?,
                '#' if !self.started => self.comment(),
                '`' => return Err(cannot("a `command` substitution (backquotes)")),
                '|' => {
                    return Err(cannot(if self.peek(0) == Some('|') {
                        "`||` (a list)"
                    } else {
                        "`|` (a pipeline)"
                    }))
                }
                '&' => {
                    return Err(cannot(if self.peek(0) == Some('&') {
                        "`&&` (a list)"
                    } else {
                        "`&` (a background job)"
                    }))
                }
                ';' => return Err(cannot("`;` (a second command)")),
                '<' | '>' => return Err(cannot("a redirection (`<`, `>`)")),
                '(' | ')' => return Err(cannot("`(` `)` (a subshell)")),
                '*' | '?' | '[' => {
                    return Err(cannot(&format!(
                        "the unquoted glob character `{c}` (pathname expansion)"
                    )))
                }
                '~' if !self.started => return Err(cannot("`~` (tilde expansion)")),
                c => self.push(c),
            }
        }
        self.end_word();
        Ok(())
    }

    fn push(&mut self, c: char) {
        self.word.push(c);
        self.started = true;
    }

    fn comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.i += 1;
        }
    }

    /// After a newline that ends the command: only blanks and comments may follow.
    fn rest_is_blank(&mut self) -> Result<(), String> {
        let mut j = self.i;
        while let Some(&c) = self.chars.get(j) {
            match c {
                ' ' | '\t' | '\n' => j += 1,
                '#' => {
                    while self.chars.get(j).is_some_and(|c| *c != '\n') {
                        j += 1;
                    }
                }
                _ => return Err(cannot("a second command on a new line (a newline without a `\\` before it ends the command)")),
            }
        }
        self.i = j;
        Ok(())
    }

    fn single(&mut self) -> Result<(), String> {
        self.started = true;
        loop {
            match self.peek(0) {
                None => {
                    return Err(
                        "the sh -c string has an unterminated single quote (sh: unexpected EOF)"
                            .to_owned(),
                    )
                }
                Some('\'') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(c) => {
                    self.i += 1;
                    self.word.push(c);
                }
            }
        }
    }

    fn double(&mut self) -> Result<(), String> {
        self.started = true;
        loop {
            let Some(c) = self.peek(0) else {
                return Err(
                    "the sh -c string has an unterminated double quote (sh: unexpected EOF)"
                        .to_owned(),
                );
            };
            self.i += 1;
            match c {
                '"' => return Ok(()),
                '\\' => match self.peek(0) {
                    Some('\n') => self.i += 1,
                    Some(n @ ('$' | '`' | '"' | '\\')) => {
                        self.i += 1;
                        self.word.push(n);
                    }
                    _ => self.word.push('\\'),
                },
                '$' => self.dollar(true)?,
                '`' => return Err(cannot("a `command` substitution (backquotes)")),
                c => self.word.push(c),
            }
        }
    }

    /// `$NAME`, `${NAME}`; a lone `$` is itself.
    fn dollar(&mut self, quoted: bool) -> Result<(), String> {
        let name =
            match self.peek(0) {
                Some('(') if self.peek(1) == Some('(') => return self.arithmetic(),
                Some('(') => return Err(cannot("`$(...)` (command substitution)")),
                Some('{') => {
                    self.i += 1;
                    let mut name = String::new();
                    loop {
                        match self.peek(0) {
                            None => return Err(
                                "the sh -c string has an unterminated `${` (sh: bad substitution)"
                                    .to_owned(),
                            ),
                            Some('}') => {
                                self.i += 1;
                                break;
                            }
                            Some(c) if c == '_' || c.is_ascii_alphanumeric() => {
                                self.i += 1;
                                name.push(c);
                            }
                            Some(c) => {
                                return Err(cannot(&format!(
                                    "`${{{name}{c}...}}` (a parameter expansion operator)"
                                )))
                            }
                        }
                    }
                    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                        return Err(cannot(&format!("`${{{name}}}` (a positional parameter)")));
                    }
                    name
                }
                Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                    let mut name = String::new();
                    while let Some(c) = self
                        .peek(0)
                        .filter(|c| *c == '_' || c.is_ascii_alphanumeric())
                    {
                        self.i += 1;
                        name.push(c);
                    }
                    name
                }
                Some(c @ ('0'..='9' | '@' | '*' | '#' | '?' | '-' | '$' | '!')) => {
                    return Err(cannot(&format!(
                        "`${c}` (a positional or special parameter)"
                    )))
                }
                _ => {
                    self.push('$');
                    return Ok(());
                }
            };
        let Some(value) = self.env.get(&name) else {
            return Err(format!("the sh -c string uses ${name}, which the container's env does not set (its value would come from the image or the runtime, which hisparse-check cannot see): add it to env, or write the value"));
        };
        self.started |= quoted;
        if quoted {
            self.word.push_str(value);
            return Ok(());
        }
        // Field splitting on the default IFS (space, tab, newline).
        let mut parts = value.split([' ', '\t', '\n']).peekable();
        let leading_blank = value.starts_with([' ', '\t', '\n']);
        if leading_blank {
            self.end_word();
        }
        while let Some(part) = parts.next() {
            if !part.is_empty() {
                self.word.push_str(part);
                self.started = true;
            }
            if parts.peek().is_some() {
                self.end_word();
            }
        }
        Ok(())
    }
}

impl Splitter<'_> {
    /// `$((EXPR))` (after the `$`): its value, as one word's text (a number
    /// never splits into fields).
    fn arithmetic(&mut self) -> Result<(), String> {
        self.i += 2;
        let start = self.i;
        let mut depth = 0usize;
        loop {
            match self.peek(0) {
                None => {
                    return Err(
                        "the sh -c string has an unterminated `$((` (sh: unexpected EOF)"
                            .to_owned(),
                    )
                }
                Some(')') if depth == 0 && self.peek(1) == Some(')') => break,
                Some(')') => depth = depth.saturating_sub(1),
                Some('(') => depth += 1,
                Some('$' | '`') if self.peek(1) == Some('(') || self.peek(0) == Some('`') => {
                    return Err(cannot("a command substitution inside `$((...))`"))
                }
                _ => {}
            }
            self.i += 1;
        }
        let expr: String = self.chars[start..self.i].iter().collect();
        self.i += 2;
        let v = super::arith::eval(&expr, self.env)?;
        self.word.push_str(&v.to_string());
        self.started = true;
        Ok(())
    }
}

/// Split `script` (the string after `sh -c`) as sh would, with `env` the
/// container's environment. Err: what we cannot read, named.
pub fn split(script: &str, env: &BTreeMap<String, String>) -> Result<Command, String> {
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "the sh -c string is {} bytes, over the bound of {MAX_SCRIPT_BYTES} bytes",
            script.len()
        ));
    }
    let mut s = Splitter {
        chars: script.chars().collect(),
        i: 0,
        env,
        words: Vec::new(),
        word: String::new(),
        started: false,
    };
    s.run()?;
    let mut words = s.words.into_iter().peekable();
    let mut own_env = Vec::new();
    while let Some(w) = words.peek() {
        match w.split_once('=') {
            Some((k, v)) if is_name(k) => {
                own_env.push((k.to_owned(), v.to_owned()));
                words.next();
            }
            _ => break,
        }
    }
    let mut argv: Vec<String> = words.collect();
    if argv.first().map(String::as_str) == Some("exec") {
        argv.remove(0);
    }
    if argv.is_empty() {
        return Err("the sh -c string runs no command".to_owned());
    }
    Ok(Command { argv, env: own_env })
}

fn is_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether `argv` is a shell running a string (`sh -c S`, `bash -ec S`,
/// `/bin/sh -xc S`): the index of the string.
pub fn script_index(argv: &[String]) -> Option<usize> {
    let prog = argv.first()?.rsplit('/').next()?;
    if !matches!(prog, "sh" | "bash" | "dash" | "ash") {
        return None;
    }
    let mut i = 1;
    while let Some(opt) = argv.get(i) {
        if !opt.starts_with('-') || opt == "-" || opt == "--" {
            return None;
        }
        i += 1;
        if opt.contains('c') && !opt.starts_with("--") {
            return (i < argv.len()).then_some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn words(script: &str) -> Vec<String> {
        split(
            script,
            &env(&[("TP", "8"), ("FLAGS", " --a  b "), ("EMPTY", "")]),
        )
        .unwrap()
        .argv
    }

    #[test]
    fn quotes_escapes_and_continuations() {
        assert_eq!(
            words("exec vllm serve /m \\\n  --kv-transfer-config '{\"a\": 1}' --x \"say \\\"hi\\\" \\$x\""),
            ["vllm", "serve", "/m", "--kv-transfer-config", "{\"a\": 1}", "--x", "say \"hi\" $x"]
        );
        assert_eq!(words("a 'b\\'c"), ["a", "b\\c"]);
        assert_eq!(words("a \"\" b"), ["a", "", "b"]);
        assert_eq!(words("a b\\ c # comment\n\n"), ["a", "b c"]);
        assert_eq!(words("a\"b\"'c'd"), ["abcd"]);
        assert_eq!(words("a \"b\\q\""), ["a", "b\\q"]);
        assert_eq!(words("a $ b"), ["a", "$", "b"]);
        // A backslash that ends the script stays (dash and bash print `[a][\]`
        // for `printf '[%s]' a \`); it was an empty word (break-it trial).
        assert_eq!(words("a \\"), ["a", "\\"]);
        assert_eq!(words("a b\\"), ["a", "b\\"]);
    }

    #[test]
    fn variables_and_field_splitting() {
        assert_eq!(words("x --tp $TP --t=${TP}x"), ["x", "--tp", "8", "--t=8x"]);
        assert_eq!(words("x $FLAGS"), ["x", "--a", "b"]);
        assert_eq!(words("x \"$FLAGS\""), ["x", " --a  b "]);
        assert_eq!(words("x $EMPTY y"), ["x", "y"]);
        assert_eq!(words("x \"$EMPTY\" y"), ["x", "", "y"]);
        let c = split("A=1 B='x y' exec vllm serve m", &env(&[])).unwrap();
        assert_eq!(c.argv, ["vllm", "serve", "m"]);
        assert_eq!(
            c.env,
            [("A".into(), "1".into()), ("B".into(), "x y".into())]
        );
    }

    #[test]
    fn what_is_not_read_is_named() {
        for (script, named) in [
            ("pip install x && vllm serve m", "&&"),
            ("a | b", "pipeline"),
            ("a; b", ";"),
            ("a\nb", "new line"),
            ("a $(hostname)", "command substitution"),
            ("a $((1 == 1))", "`=`"),
            ("a `hostname`", "backquotes"),
            ("a > log", "redirection"),
            ("a *.json", "glob"),
            ("a ${X:-1}", "operator"),
            ("a $1", "positional"),
            ("a $UNSET", "does not set"),
            ("a 'b", "unterminated"),
            ("a ~/m", "tilde"),
        ] {
            let e = split(script, &env(&[("X", "1")])).unwrap_err();
            assert!(e.contains(named), "{script}: {e}");
        }
        let long = "a".repeat(MAX_SCRIPT_BYTES + 1);
        assert!(split(&long, &env(&[])).unwrap_err().contains("bound"));
    }

    #[test]
    fn shells_running_a_string() {
        let v = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(script_index(&v(&["sh", "-c", "x"])), Some(2));
        assert_eq!(script_index(&v(&["/bin/bash", "-ec", "x"])), Some(2));
        assert_eq!(script_index(&v(&["bash", "-x", "-c", "x"])), Some(3));
        assert_eq!(script_index(&v(&["vllm", "serve"])), None);
        assert_eq!(script_index(&v(&["sh", "script.sh"])), None);
    }
}

/// The splitting held to a real `sh`: each script, run as `sh -c "printf
/// '%s\0' SCRIPT"` with the same env, prints the words sh would exec.
#[cfg(all(test, unix))]
mod against_sh {
    use super::*;

    #[test]
    fn words_equal_what_sh_execs() {
        let env: BTreeMap<String, String> = [
            ("TP".to_owned(), "8".to_owned()),
            ("FLAGS".to_owned(), " --a  b\tc ".to_owned()),
            ("EMPTY".to_owned(), String::new()),
            ("J".to_owned(), "{\"k\": \"v w\"}".to_owned()),
        ]
        .into();
        let scripts = [
            "vllm serve /m \\\n  --kv-transfer-config '{\"a\": 1}' --x \"say \\\"hi\\\" \\$x\"",
            "a 'b\\'c",
            "a \"\" b",
            "a b\\ c # comment\n\n",
            "a\"b\"'c'd",
            "a \"b\\q\" 'e\\f'",
            "a $ b",
            "x --tp $TP --t=${TP}x",
            "x $FLAGS",
            "x \"$FLAGS\"",
            "x $EMPTY y",
            "x \"$EMPTY\" y",
            "x $J",
            "x \"$J\" --j=$J",
            "x pre$FLAGS\"post\"",
            "x a\\\nb",
            "x \"a\\\nb\"",
            "x 'a\nb'",
            "x --r $((TP * 2 + 1)) --s=\"$(( (TP - 2) / 3 ))\"",
        ];
        for script in scripts {
            let ours = split(script, &env).unwrap().argv;
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf '%s\\0' {script}"))
                .env_clear()
                .envs(&env)
                .output()
                .expect("sh runs");
            let text = String::from_utf8(out.stdout).unwrap();
            let theirs: Vec<&str> = text
                .strip_suffix('\0')
                .unwrap_or(&text)
                .split('\0')
                .collect();
            assert_eq!(ours, theirs, "{script:?}");
        }
    }
}
