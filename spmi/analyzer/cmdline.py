"""A small command-line parser that reads arguments the way jit-analyze's System.CommandLine 2.0 does
(docs/contracts.md §8.1), so `jitanalyze.py` takes every form the real tool takes.

Forms: `--base X`, `--base=X`, `--base:X`, `-b X`, `-b:X`, `-b=X`; bool options with an optional
`true`/`false` (`-r`, `-r false`, `--recursive=true`); POSIX bundles of one-letter options (`-rw`,
`-c5`, `-rc5`); `@file` response files (one or more arguments per line, `#` comment lines, double
quotes group); `--` ends the options (what follows is a stray argument); `-h`/`--help`/`-?`,
`--version` (`-v`). An option that takes a value takes the next token whatever it looks like, one value
per token; an option that is not repeatable takes one value in all (given twice: an error). Errors name
an option as it was typed (`-b`, not `--base`). Everything here is pure: `parse` gets the arguments and a
function that reads a response file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Dict, List, Optional, Sequence, Tuple


class ValueKind(Enum):
    """What an option takes (the real tool's option types)."""

    FLAG = "System.Boolean"   # no value or one optional `true`/`false`
    TEXT = "System.String"    # one value
    INT = "System.Int32"      # one value, an integer
    LIST = "System.String[]"  # one value per occurrence, repeatable
    DOUBLE = "System.Double"  # one value (checked by the caller: the suite's forms, §8.8)


@dataclass(frozen=True)
class OptionSpec:
    """One option: its name (`--base`), its aliases (`-b`), what it takes and its help line."""

    name: str
    aliases: Tuple[str, ...] = ()
    kind: ValueKind = ValueKind.TEXT
    help: str = ""
    value_name: str = ""        # shown as `<value_name>` in the help (default: the name without dashes)
    default: Optional[str] = None  # shown as `[default: ...]` in the help
    extension: bool = False     # the suite's own option (not in the released tool)
    repeatable: bool = False    # takes one value per occurrence (else one value in all)

    @property
    def forms(self) -> Tuple[str, ...]:
        return (self.name,) + self.aliases

    @property
    def takes_value(self) -> bool:
        return self.kind is not ValueKind.FLAG

    @property
    def takes_many(self) -> bool:
        return self.repeatable or self.kind is ValueKind.LIST


HELP_FORMS = ("-h", "/h", "--help", "-?", "/?")
VERSION_FORMS = ("--version", "-v")


@dataclass
class ParsedArgs:
    """The result of `parse`: values by option name, in the order given."""

    values: Dict[str, List[str]] = field(default_factory=dict)  # option name -> values (flags: "True"/"False")
    errors: List[str] = field(default_factory=list)
    unmatched: List[str] = field(default_factory=list)  # stray tokens (also named in `errors`)
    help: bool = False
    version: bool = False

    def given(self, name: str) -> bool:
        return name in self.values

    def last(self, name: str) -> Optional[str]:
        found = self.values.get(name)
        return found[-1] if found else None

    def flag(self, name: str) -> bool:
        return self.last(name) == "True"


# ------------------------------------------------------------------ response files


def split_response_line(line: str) -> List[str]:
    """The arguments of one response-file line: whitespace separates, double quotes group (and go)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return []
    words: List[str] = []
    current: List[str] = []
    in_quotes = started = False
    for ch in text:
        if ch == '"':
            in_quotes = not in_quotes
            started = True
        elif ch.isspace() and not in_quotes:
            if started:
                words.append("".join(current))
                current, started = [], False
        else:
            current.append(ch)
            started = True
    if started:
        words.append("".join(current))
    return words


def expand_response_files(argv: Sequence[str], read_text: Callable[[str], str],
                          errors: List[str], depth: int = 0) -> List[str]:
    """`@file` arguments replaced by the file's arguments (nested files too); a file that cannot be
    read adds `Response file not found '<file>'.` to `errors`."""
    out: List[str] = []
    for arg in argv:
        if len(arg) > 1 and arg.startswith("@") and depth < 32:
            path = arg[1:]
            try:
                text = read_text(path)
            except (OSError, UnicodeDecodeError):
                errors.append(f"Response file not found '{path}'.")
                continue
            words = [w for line in text.splitlines() for w in split_response_line(line)]
            out += expand_response_files(words, read_text, errors, depth + 1)
        else:
            out.append(arg)
    return out


# ------------------------------------------------------------------ tokens

_OPTION, _ARGUMENT, _DOUBLE_DASH = "option", "argument", "--"


def _split_at_delimiter(arg: str) -> Optional[Tuple[str, Optional[str]]]:
    """`--base=X` / `--base:X` -> ("--base", "X"); None when there is no `:` or `=`."""
    positions = [i for i in (arg.find(":"), arg.find("=")) if i >= 0]
    if not positions:
        return None
    at = min(positions)
    rest = arg[at + 1:]
    return arg[:at], (rest if rest else None)


def _tokenize(argv: Sequence[str], known: Dict[str, OptionSpec]) -> List[Tuple[str, str]]:
    tokens: List[Tuple[str, str]] = []

    def previous_expects_value() -> bool:
        if not tokens or tokens[-1][0] != _OPTION:
            return False
        spec = known.get(tokens[-1][1])
        return spec is not None and spec.takes_value

    ended = False
    for arg in argv:
        if ended:
            tokens.append((_ARGUMENT, arg))
        elif arg == "--":
            tokens.append((_DOUBLE_DASH, arg))
            ended = True
        elif arg in known:
            tokens.append((_ARGUMENT if previous_expects_value() else _OPTION, arg))
        else:
            split = _split_at_delimiter(arg)
            if split is not None and split[0] in known:
                tokens.append((_OPTION, split[0]))
                if split[1] is not None:
                    tokens.append((_ARGUMENT, split[1]))
            elif not _unbundle(arg, known, tokens, previous_expects_value()):
                tokens.append((_ARGUMENT, arg))
    return tokens


def _unbundle(arg: str, known: Dict[str, OptionSpec], tokens: List[Tuple[str, str]], after_value_option: bool) -> bool:
    """`-rw` -> `-r`, `-w`; `-c5` -> `-c`, `5`. False (and nothing added) when `arg` is no bundle."""
    if len(arg) <= 2 or arg[0] != "-" or arg[1] == "-" or arg[2] in ":=" or after_value_option:
        return False
    added: List[Tuple[str, str]] = []
    body = arg[1:]
    for i, ch in enumerate(body):
        if ch in ":=":
            added.append((_ARGUMENT, body[i + 1:]))
            break
        spec = known.get("-" + ch)
        if spec is None:
            if added and added[-1][0] == _OPTION:
                added.append((_ARGUMENT, body[i:]))  # the rest is a value
                break
            return False
        added.append((_OPTION, "-" + ch))
        if spec.takes_value and i != len(body) - 1:
            start = i + 2 if body[i + 1] in ":=" else i + 1
            added.append((_ARGUMENT, body[start:]))
            break
    tokens.extend(added)
    return True


# ------------------------------------------------------------------ parsing

_INT_RE = re.compile(r"^\s*[+-]?[0-9]+\s*$")


def parse_bool(text: str) -> Optional[bool]:
    """.NET `bool.TryParse`: `true`/`false` in any case, surrounding whitespace allowed."""
    t = text.strip().lower()
    return True if t == "true" else False if t == "false" else None


def parse_int32(text: str) -> Optional[int]:
    """.NET `int.TryParse` (integer style): optional sign, digits, surrounding whitespace; 32 bits."""
    if not _INT_RE.match(text):
        return None
    value = int(text.strip())
    return value if -(1 << 31) <= value < (1 << 31) else None


def parse(argv: Sequence[str], specs: Sequence[OptionSpec], read_text: Callable[[str], str]) -> ParsedArgs:
    """Parse `argv` as jit-analyze's System.CommandLine root command would (docs/contracts.md §8.1)."""
    result = ParsedArgs()
    expanded = expand_response_files(argv, read_text, result.errors)
    known: Dict[str, OptionSpec] = {form: spec for spec in specs for form in spec.forms}
    special = {form: OptionSpec(form, kind=ValueKind.FLAG) for form in HELP_FORMS + VERSION_FORMS}
    known.update(special)
    tokens = _tokenize(expanded, known)
    typed: Dict[str, str] = {}  # option name -> the form it was first given as
    explicit: Dict[str, int] = {}  # option name -> values given (a flag's `true`/`false` included)
    version_form = ""
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        i += 1
        if kind == _DOUBLE_DASH:
            continue
        if kind == _ARGUMENT:
            result.unmatched.append(text)
            continue
        spec = known[text]
        value: Optional[str] = None
        if i < len(tokens) and tokens[i][0] == _ARGUMENT:
            if spec.takes_value or parse_bool(tokens[i][1]) is not None:
                value = tokens[i][1]
                i += 1
        typed.setdefault(spec.name, text)
        if value is not None:
            explicit[spec.name] = explicit.get(spec.name, 0) + 1
        if text in HELP_FORMS:
            result.help = True
        elif text in VERSION_FORMS:
            result.version = True
            version_form = version_form or text
        elif spec.kind is ValueKind.FLAG:
            flag = True if value is None else parse_bool(value)
            result.values.setdefault(spec.name, []).append(str(flag))
        elif value is None:
            result.errors.append(f"Required argument missing for option: '{text}'.")
        elif spec.kind is ValueKind.INT and parse_int32(value) is None:
            result.errors.append(f"Cannot parse argument '{value}' for option '{text}' as expected type "
                                 f"'{spec.kind.value}'.")
        else:
            result.values.setdefault(spec.name, []).append(value)
    result.errors += [f"Option '{typed[name]}' expects a single argument but {count} were provided."
                      for name, count in explicit.items() if count > 1 and not known[name].takes_many]
    result.errors += [f"Unrecognized command or argument '{t}'." for t in result.unmatched]
    if result.version and (len(expanded) > 1):
        result.errors.append(f"{version_form} option cannot be combined with other arguments.")
    return result


# ------------------------------------------------------------------ help


def _first_column(spec: OptionSpec) -> str:
    forms = ", ".join(sorted(spec.aliases, key=len) + [spec.name])
    if spec.kind is ValueKind.FLAG:
        return forms
    return f"{forms} <{spec.value_name or spec.name.lstrip('-')}>"


def format_help(program: str, description: str, specs: Sequence[OptionSpec], epilog: str = "") -> str:
    """The help text in System.CommandLine's layout; suite extensions are marked as such."""
    rows = [("-?, -h, --help", "Show help and usage information"), ("-v, --version", "Show version information")]
    for spec in specs:
        text = spec.help + (f" [default: {spec.default}]" if spec.default is not None else "")
        rows.append((_first_column(spec), ("[suite extension] " if spec.extension else "") + text))
    width = max(len(first) for first, _ in rows) + 2
    lines = ["Description:", f"  {description}", "", "Usage:", f"  {program} [options]", "", "Options:"]
    lines += [f"  {first.ljust(width)}{second}" for first, second in rows]
    text = "\n".join(lines) + "\n\n"
    return text + (epilog if epilog.endswith("\n") or not epilog else epilog + "\n")
