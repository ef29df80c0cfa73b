"""Usage errors answered as the ecosystem's tools answer them (docs/upstream.md, docs/contracts.md §12.1).

* A usage error (an unknown command or option, a bad value, a missing argument) is one line and exit
  code 2, as argparse's own.
* An unknown subcommand, option or choice gets the closest known one: `did you mean 'asmdiffs'?`.
* A flag upstream's scripts spell differently is answered with the suite's name (`renamed to …`).
* `--version` prints the script's name and the suite's version.

Pure functions plus the argparse actions that use them; `config.ArgumentParser` calls them.
"""
from __future__ import annotations

import argparse
import difflib
from typing import Iterable, List, Optional, Sequence

import spmi

#: The exit code of a usage error (argparse's own).
USAGE_EXIT = 2
#: How alike a typed word and a known one must be to be suggested (difflib's ratio).
_CLOSE_ENOUGH = 0.7


def _normalized(word: str) -> str:
    """An option or command without its leading dashes, `-` and `_` alike, any case."""
    return word.lstrip("-").replace("-", "_").lower()


def closest(word: str, known: Iterable[str]) -> Optional[str]:
    """The known spelling meant by `word`: the same name with other dashes or case, else the most alike."""
    candidates = sorted(set(known))
    typed = _normalized(word)
    same = [c for c in candidates if _normalized(c) == typed]
    if same:
        return same[0]
    by_name = {_normalized(c): c for c in candidates}
    match = difflib.get_close_matches(typed, list(by_name), n=1, cutoff=_CLOSE_ENOUGH)
    return by_name[match[0]] if match else None


def invalid_choice(value: str, choices: Sequence[str]) -> str:
    """argparse's invalid-choice message, worded alike on every Python version, with a suggestion."""
    text = f"invalid choice: '{value}' (choose from {', '.join(str(c) for c in choices)})"
    best = closest(value, [str(c) for c in choices])
    return f"{text}; did you mean '{best}'?" if best else text


def visible_options(parser: argparse.ArgumentParser) -> List[str]:
    """The option strings `-h` lists (hidden ones, such as renamed upstream flags, left out)."""
    return [flag for action in parser._actions if action.option_strings and action.help != argparse.SUPPRESS
            for flag in action.option_strings]


def unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """argparse's unrecognized-arguments message, with the option meant by each unknown flag."""
    text = f"unrecognized arguments: {' '.join(extras)}"
    known = visible_options(parser)
    meant = [(flag, closest(flag, known)) for flag in extras if flag.startswith("-") and len(flag) > 1]
    found = [(flag, best) for flag, best in meant if best]
    if len(found) == 1:
        return f"{text}; did you mean {found[0][1]}?"
    if found:
        return f"{text}; did you mean " + ", ".join(f"{best} (for {flag})" for flag, best in found) + "?"
    return text


def chosen_parser(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's own parser: the one whose options an unknown flag is compared with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(namespace, action.dest, None) if action.dest != argparse.SUPPRESS else None
            if isinstance(name, str) and name in action.choices:
                return chosen_parser(action.choices[name], namespace)
    return parser


class RenamedOption(argparse.Action):
    """An upstream spelling of an option the suite names otherwise: refused, naming the suite's name."""

    def __init__(self, option_strings: List[str], dest: str, renamed_to: str = "", **kwargs: object) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs="?", default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS)
        self.renamed_to = renamed_to

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> None:
        parser.error(renamed_message(option_string or self.option_strings[0], self.renamed_to))


def renamed_message(upstream: str, suite: str) -> str:
    return f"{upstream} (upstream's spelling) was renamed to {suite}; pass {suite} instead"


def add_renamed(parser: "argparse._ActionsContainer", upstream: str, suite: str) -> None:
    """Answer upstream's `upstream` flag with "renamed to `suite`" (not listed by `-h`)."""
    parser.add_argument(upstream, action=RenamedOption, renamed_to=suite)


def version_text(prog: str) -> str:
    return f"{prog} {spmi.__version__}"


def add_version(parser: argparse.ArgumentParser) -> None:
    """`--version`: the script's name and the suite's version, exit 0."""
    parser.add_argument("--version", action="version", version=version_text(parser.prog),
                        help="print the version and exit")
