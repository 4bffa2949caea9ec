"""Random ``--config`` serve files that exercise YAML 1.1 as PyYAML reads it.

``serve_file(rng)`` writes one file's text: top-level flag names (real
``vllm serve`` flags, booleans among them, and made-up ones) with values of
every kind PyYAML's resolvers and SafeConstructor know: ints in bases
2/8/10/16/60 with signs and underscores, floats (exponents, ``.inf``,
``.nan``, base 60), YAML 1.1 booleans in every case, nulls, timestamps,
strings that look like numbers; quoted and block scalars; flow and block
collections; anchors, aliases and ``<<`` merges; duplicate keys; explicit
tags; unicode; comments; directives and document markers; and broken
variants of all of them. Used by test_yaml_fuzz.py (hypothesis draws the
seed; ``HYPOTHESIS_PROFILE=dev`` draws new seeds on each run).
"""

from __future__ import annotations

import random

FLAGS = [
    "tensor-parallel-size",
    "max-model-len",
    "gpu-memory-utilization",
    "block-size",
    "revision",
    "enable-prefix-caching",
    "enforce-eager",
    "trust-remote-code",
    "disable-log-stats",
    "scheduler-reserve-full-isl",
    "enable_prefix_caching",
    "kv-transfer-config",
    "hf-overrides",
    "attention-config",
    "x",
    "ab",
    "é",
    "ключ",
]
WORDS = ["a", "ab", "b", "k", "kv_role", "host_pool_gib", "é", "ā", "日本", ""]


def _digits(rng: random.Random, alphabet: str, n: int) -> str:
    out = "".join(rng.choice(alphabet) for _ in range(n))
    if rng.random() < 0.3 and n > 1:
        at = rng.randrange(1, n)
        out = out[:at] + "_" * rng.randint(1, 2) + out[at:]
    return out


def _sign(rng: random.Random) -> str:
    return rng.choice(["", "", "-", "+"])


def number(rng: random.Random) -> str:
    """A plain scalar that is (or nearly is) a YAML 1.1 int or float."""
    kind = rng.randrange(14)
    n = rng.choice([1, 1, 2, 3, 5, 20, 40])
    if kind == 0:
        return _sign(rng) + "0b" + _digits(rng, "01", n)
    if kind == 1:
        return _sign(rng) + "0" + _digits(rng, "01234567", n)
    if kind == 2:
        return _sign(rng) + rng.choice("123456789") + _digits(rng, "0123456789", n - 1)
    if kind == 3:
        return _sign(rng) + "0x" + _digits(rng, "0123456789abcdefABCDEF", n)
    if kind == 4:  # base 60
        parts = [str(rng.randint(1, 400))] + [str(rng.randint(0, 70)) for _ in range(rng.randint(1, 4))]
        tail = "." + _digits(rng, "0123456789", rng.randint(0, 4)) if rng.random() < 0.4 else ""
        return _sign(rng) + ":".join(parts) + tail
    if kind == 5:
        mant = (
            _digits(rng, "0123456789", rng.randint(1, 4))
            + "."
            + _digits(rng, "0123456789", rng.randint(0, 4))
        )
        if rng.random() < 0.5:
            mant += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 400))
        return _sign(rng) + mant
    if kind == 6:
        return _sign(rng) + "." + rng.choice(["inf", "Inf", "INF", "nan", "NaN", "NAN", "iNf", "5", "5e+3"])
    if kind == 7:
        return rng.choice(["1e3", "1E+3", "9e-1", "0o17", "0x", "0b", "0x_", "0b2", "08", "1__0", "_1", "1_"])
    if kind == 8:
        return rng.choice(["0", "-0", "+0", "00", "0.", "-0.0", "0_0", "1.e+5", "12e+03", "1:60", "1:5:9"])
    if kind == 9:
        return "9" * rng.choice([18, 19, 20, 38, 39, 40, 4300, 4301, 5000])
    if kind == 10:
        return "0x" + "f" * rng.choice([31, 32, 33, 3571, 3572, 4000])
    if kind == 11:
        return "1" + ":59" * rng.choice([1, 5, 25, 40])
    if kind == 12:
        return (
            _sign(rng)
            + str(rng.randint(1, 9))
            + "."
            + str(rng.randint(0, 999))
            + "e-"
            + str(rng.randint(1, 330))
        )
    return rng.choice(["1.7976931348623157e+308", "1.0e+309", "4.9e-324", "2.5e-324", "123456789012345678.0"])


def word(rng: random.Random) -> str:
    """A plain scalar that is (or looks like) a bool, null, timestamp or string."""
    kind = rng.randrange(16)
    if kind in (0, 8, 9):
        b = rng.choice(["yes", "no", "true", "false", "on", "off", "y", "n"])
        return rng.choice([b, b.upper(), b.capitalize(), b[0].upper() + b[1:].swapcase()])
    if kind == 1:
        return rng.choice(["~", "null", "Null", "NULL", "nULL", "None", "none"])
    if kind == 2:
        y = rng.choice(["2024", "2001", "0000", "1999", "9999"])
        month = rng.choice(["01", "1", "12", "13", "02"])
        date = f"{y}-{month}-{rng.choice(['01', '1', '29', '30', '31', '32'])}"
        if rng.random() < 0.5:
            sep = rng.choice(["T", "t", " ", "  ", "\t"])
            time = f"{rng.randint(0, 25)}:{rng.randint(0, 61):02}:{rng.randint(0, 61):02}"
            if rng.random() < 0.5:
                time += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 8)))
            tz = rng.choice(["", "Z", " Z", "+5", "-05:30", " -5", "+23:59", "+24", "+1:99", "+05:3"])
            return date + sep + time + tz
        return date
    if kind == 3:
        return rng.choice(["<<", "=", "HiSparseConnector", "kv_both", "fp8_ds_mla", "a b", "a:b", "a #b"])
    if kind in (4, 10, 11, 12):
        return rng.choice(WORDS[:-1])
    if kind == 5:
        return rng.choice(["\u2028x", "x\u00a0y", "日本語", "😀", "a\u0085b", "\ufeffx", "ÿ"])
    if kind in (6, 13, 14):
        return rng.choice(["1.0.0", "v1", "1-2", "1 2", "+", "-", "-.5", "+.inf", "- a", "-a"])
    return rng.choice(["@x", "`x", "%x", "x%", "!x", "&x", "*x", "|x", ">x", "'x", '"x', "? x", ": x", "#x"])


def scalar(rng: random.Random) -> str:
    """A plain, quoted or block scalar's text, maybe tagged (inline, no line break unless block)."""
    text = number(rng) if rng.random() < 0.5 else word(rng)
    style = rng.randrange(10)
    if style == 0:
        text = "'" + text.replace("'", "''") + "'"
    elif style == 1:
        esc = rng.choice(
            ["", "\\x41", "\\u00e9", "\\u0101", "\\ud800", "\\U0001F600", "\\t", "\\/", "\\N", "\\q"]
        )
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + esc + '"'
    if rng.random() < 0.1:
        tag = rng.choice(
            [
                "!!str",
                "!!int",
                "!!float",
                "!!bool",
                "!!null",
                "!!timestamp",
                "!",
                "!!binary",
                "!!python/none",
                "!x",
                "!<tag:yaml.org,2002:int>",
                "!!merge",
                "!!value",
                "!!map",
                "!!seq",
            ]
        )
        text = f"{tag} {text}"
    return text


def block_scalar(rng: random.Random, indent: int) -> str:
    """A literal or folded block scalar (starts on the key's line, ends with a line break)."""
    head = rng.choice(["|", ">", "|-", ">-", "|+", ">+", "|2", "! |", "!!int |", "! >-"])
    pad = " " * (indent + 2)
    lines = [rng.choice([number(rng), word(rng), ""]) for _ in range(rng.randint(1, 3))]
    return head + "\n" + "".join(f"{pad}{line}\n" if line else "\n" for line in lines)


class Doc:
    """One file under construction: anchors defined so far."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.anchors: list[str] = []
        self.n = 0

    def anchor(self) -> str:
        if self.rng.random() < 0.15:
            self.n += 1
            name = self.rng.choice(["a", "b", "x", "m"]) + str(self.n)
            self.anchors.append(name)
            return f"&{name} "
        return ""

    def alias(self) -> str | None:
        if self.anchors and self.rng.random() < 0.2:
            return "*" + self.rng.choice(self.anchors)
        return None

    def flow(self, depth: int) -> str:
        rng = self.rng
        alias = self.alias()
        if alias:
            return alias
        if depth > 2 or rng.random() < 0.6:
            return scalar(rng)
        anchor = self.anchor()
        items = rng.randint(0, 3)
        if rng.random() < 0.5:
            body = ", ".join(self.flow(depth + 1) for _ in range(items))
            return f"{anchor}[{body}]"
        pairs = []
        for _ in range(items):
            key = rng.choice([*WORDS, scalar(rng), "<<", "<<", "=", "1", "1.0", "true", "~"])
            value = self.merge_value(depth) if key == "<<" else self.flow(depth + 1)
            pairs.append(f"{key or repr('')}: {value}")
        return anchor + "{" + ", ".join(pairs) + "}"

    def merge_value(self, depth: int) -> str:
        rng = self.rng
        maps = self.anchors
        if maps and rng.random() < 0.6:
            return rng.choice(
                [f"*{rng.choice(maps)}", "[" + ", ".join(f"*{rng.choice(maps)}" for _ in range(2)) + "]"]
            )
        if rng.random() < 0.9:
            pairs = ", ".join(f"{rng.choice(WORDS[:-1])}: {scalar(rng)}" for _ in range(rng.randint(0, 3)))
            return "{" + pairs + "}"
        return self.flow(depth + 1)

    def block(self, indent: int, depth: int) -> str:
        """A block value after 'key:' (starts with a space or a line break)."""
        rng = self.rng
        pad = " " * (indent + 2)
        kind = rng.randrange(6) if depth < 3 else 0
        if kind <= 1:
            return " " + self.flow(depth)
        if kind == 2:
            return " " + self.anchor() + block_scalar(rng, indent).rstrip("\n")
        if kind == 3:  # block sequence
            anchor = self.anchor().strip()
            items = "".join(f"\n{pad}-{self.block(indent + 2, depth + 1)}" for _ in range(rng.randint(1, 3)))
            return (" " + anchor if anchor else "") + items
        anchor = self.anchor().strip()
        lines = []
        for _ in range(rng.randint(1, 4)):
            key = rng.choice([*WORDS[:-1], "<<", "<<", "'<<'", "=", "? k\n" + pad, "1", "ab"])
            value = (" " + self.merge_value(depth)) if key == "<<" else self.block(indent + 2, depth + 1)
            lines.append(f"\n{pad}{key}:{value}")
        return (" " + anchor if anchor else "") + "".join(lines)


def serve_file(rng: random.Random) -> str:
    """One serve file's text."""
    special = rng.randrange(40)
    if special == 0:
        return rng.choice(
            ["", "\n", "# c\n", "---\n", "...\n", "--- \n...\n", "~\n", "[]\n", "{}\n", "- a\n", "42\n"]
        )
    if special == 1:
        return rng.choice(
            ["\ufeffblock-size: 64\n", "a: 1\n\ufeffb: 2\n", "a: 1\r\nb: 2\r\n", "a: 1\rb: 2\r"]
        )
    if special in (2, 3, 4):  # flow-context and layout corners where scanners part ways
        return rng.choice(
            [
                "a: [b:c]\n",
                "a: [b: c]\n",
                "a: {b: c: d}\n",
                "a: [? b]\n",
                "a: [b, ]\n",
                "a: [, b]\n",
                "a: {b}\n",
                "a: {? b: c}\n",
                "a: [b]c\n",
                "a: {b: c}d\n",
                "a: [b\n  c]\n",
                "a: 'b\n\n  c'\n",
                "a: b\n  c\n",
                "a: b\n c: d\n",
                "a:\n- b\n",
                "a: [a,b:c,d]\n",
                "a: {b: [c, {d: e}]}\n",
                "a: !!str\n",
                "a: &x\n",
                "a: &x !!str b\n",
                "a: !!str &x b\n",
                "? a\n? b\n",
                "a: ? b\n",
                'a: "\\\n b"\n',
                "a: |1\n  b\n",
                "a: |0\n b\n",
                "a: >2-\n   b\n",
                "a: 'it''s'\n",
                "a: b # c # d\n",
                "a: b#c\n",
                "a: -b\n",
                "a: - b\n",
                "a: :b\n",
                "a: ?b\n",
                "a: b:\n",
                '"a\\u0041": 1\n',
                'a: "\\x4"\n',
                "a: 1\n...\n",
                "a: 1\n...\n...\n",
                "--- a: 1\n",
                "---\na: 1\n...\n---\n",
                "a: 1\n--- \n",
                "k" * 1030 + ": 1\n",
                "a: " + "[" * 60 + "]" * 60 + "\n",
                "a: \u2028b\n",
                "a: b\u2028c: d\n",
                "a: b\x85c: d\n",
                "a: !<tag:yaml.org,2002:str> 1\n",
                "a: !!int\t1\n",
                "a: !e!int 1\n",
                "%TAG !e! tag:yaml.org,2002:\n---\na: !e!int 010\n",
                "%TAG !! tag:example.com,2000:\n---\na: !!int 1\n",
                "%FOO bar\na: 1\n",
                "%YAML 1.3\na: 1\n",
                "  %FOO bar\n---\na: 1\n",
                "%FOO\tbar\n---\na: 1\n",
                "a: |\n  x\n\t\n  y\n",
                "a: |\n  x\n  \t\n  y\n",
                "\t# c\na: 1\n",
                "'a'\t: 1\n",
                'a: "x\n\t\ty"\n',
                "a: x # c\t\n",
                "a: ! |\n  010\n",
                "a: ! '~\n'\n",
                "a: !!int ' 0x1f '\n",
                "a: !!float '1_0.5'\n",
                "a: {2001-01-01: x}\n",
                "a: {.nan: 1, .nan: 2}\n",
                "a: {1.0: x, 1: y, true: z}\n",
                "a: {!!merge x: {b: 1}}\n",
                "a:\n  <<: !!map {b: 1}\n",
                "1: false\n~: []\n",
                "a: !!int 0xaé\n",
                "a: {k: v?}\n",
                "a: [1?2, b]\n",
                "a: b?c\n",
                "a: !!int 'é0'\n",
                "a: !!float 'é.5'\n",
            ]
        )
    doc = Doc(rng)
    lines = []
    if rng.random() < 0.1:
        lines.append(
            rng.choice(
                [
                    "%YAML 1.1",
                    "%YAML 1.2",
                    "%YAML 1.0",
                    "%YAML 1.3",
                    "%YAML 2.0",
                    "%TAG !e! tag:yaml.org,2002:",
                    "%FOO bar",
                ]
            )
        )
        lines.append("---")
    elif rng.random() < 0.1:
        lines.append(rng.choice(["---", "--- # c", "--- !!map"]))
    if rng.random() < 0.1:
        lines.append(rng.choice(["# comment", "#", "   # indented"]))
    for _ in range(rng.randint(1, 5)):
        key = rng.choice([*FLAGS, "<<", "'x'", '"tensor-parallel-size"', "? revision\n", "1", "~", "true"])
        value = (" " + doc.merge_value(0)) if key == "<<" else doc.block(0, 0)
        comment = rng.choice(["", "", "", " # c", "  #c"])
        lines.append(f"{key}:{value}{comment}")
    tail = rng.choice(["", "", "", "", "", "", "", "", "...", "---\nb: 1", "--- ", "# end"])
    if tail:
        lines.append(tail)
    text = "\n".join(lines) + rng.choice(["\n", "\n", ""])
    if rng.random() < 0.05:  # a broken variant
        at = rng.randrange(len(text) + 1)
        text = (
            text[:at]
            + rng.choice(["\t", "{", "]", ":", "'", "&", "*", "!", "\x00", "\x7f", "\x85", " "])
            + text[at:]
        )
    return text
