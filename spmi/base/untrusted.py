"""Text from outside the suite, made harmless where it lands (docs/contracts.md §12.20).

* `neutralize_commands`: console text never carries an Azure Pipelines logging command
  (`##vso[`, `##[` anywhere in a line; a bare CR also ends a line) nor a GitHub workflow
  command (`::` at a line start, after whitespace).
* `one_line`: CR/LF and other control characters become spaces.
* `escape_md_inline`: a name or message placed in markdown: HTML-escaped, table pipes,
  emphasis, code-span and link characters escaped, a leading heading/list/quote marker
  escaped, one line.
* `sanitize_markdown`: markdown written by a work item or a tool: only the suite's own
  tags (`ALLOWED_TAGS`) stay raw, every other tag is escaped; fenced code is left as is.
"""
from __future__ import annotations

import html
import re
from typing import List, Optional, Sequence, Tuple

# A visible marker that breaks the prefix: the agent and the runner no longer see a command.
_AZDO_PREFIX_RE = re.compile(r"##(vso)?\[", re.IGNORECASE)
_GITHUB_LINE_START_RE = re.compile(r"^([ \t]*)::", re.MULTILINE)
_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")


def _break_azdo_prefix(match: "re.Match[str]") -> str:
    return "##" + (match.group(1) or "") + "\uff3b"  # FULLWIDTH LEFT SQUARE BRACKET


def break_azdo_prefixes(text: str) -> str:
    """`##vso[`/`##[` anywhere broken; nothing else changed (for values that are escaped to one line anyway)."""
    return _AZDO_PREFIX_RE.sub(_break_azdo_prefix, text)


def neutralize_commands(text: str) -> str:
    """`text` for the console: no `##vso[`/`##[` anywhere, no line starting with `::`.

    Line structure is kept (a bare CR becomes LF, so what the agent sees as a line is what
    was checked)."""
    text = _LINE_BREAK_RE.sub("\n", text)
    text = break_azdo_prefixes(text)
    return _GITHUB_LINE_START_RE.sub(lambda m: m.group(1) + ":\u200b:", text)


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def one_line(text: str) -> str:
    """CR, LF and other control characters become single spaces."""
    return _CONTROL_RE.sub(" ", str(text))


_MD_INLINE_RE = re.compile(r"([\\`*|\[\]~])")
_MD_LINE_START_RE = re.compile(r"^(\s*)([#>+=-]|\d+[.)])")
_UNDERSCORE_EDGE_RE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def escape_html_inline(text: str) -> str:
    """Untrusted text inside an HTML element that is not markdown (`<summary>`): one line,
    `&<>"` escaped, no pipeline command."""
    flat = neutralize_commands(" ".join(one_line(text).split()))
    return html.escape(flat, quote=False).replace('"', "&quot;")


def escape_md_inline(text: str, line_start: bool = False) -> str:
    """Untrusted text inside a line of markdown (table cell, list item, after a heading marker):
    HTML-escaped, markdown punctuation escaped, one line; with `line_start`, a leading
    heading/list/quote marker is escaped too."""
    escaped = _MD_INLINE_RE.sub(r"\\\1", escape_html_inline(text))
    escaped = _UNDERSCORE_EDGE_RE.sub(r"\\_", escaped)
    if line_start:
        escaped = _MD_LINE_START_RE.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)
    return escaped


# Elements that run code, load content or take input: inside code their text is literal,
# but a reader of the raw file (or a renderer that gets the fence wrong) must not meet one.
# Generic and compiler-generated names (`List<T>`, `<Main>b__0_0`) stay readable.
_HTML_ELEMENTS = (
    "a applet audio base body button canvas dialog embed form frame frameset head html iframe image img "
    "input link listing marquee math meta noscript object picture plaintext script select source style svg "
    "template textarea title track video xmp"
).split()
_HTML_ELEMENT_RE = re.compile(r"<(?=/?(?:" + "|".join(_HTML_ELEMENTS) + r")(?![A-Za-z0-9_.:\-]))",
                              re.IGNORECASE)


def escape_html_elements(line: str) -> str:
    """`<` that opens a real HTML element becomes `&lt;` (for text inside code)."""
    return _HTML_ELEMENT_RE.sub("&lt;", line)


def code_block(lines: Sequence[str], info: str = "") -> str:
    """A fenced code block of untrusted lines: each line kept on one line, the fence longer
    than any backtick run inside, so no line can close it."""
    body = [escape_html_elements(neutralize_commands(one_line(line))) for line in lines]
    longest = max([len(run) for line in body for run in re.findall(r"`+", line)] + [2])
    fence = "`" * (longest + 1)
    return f"{fence}{info}\n" + "\n".join(body) + f"\n{fence}"


# ---------------------------------------------------------------- whole markdown documents

ALLOWED_TAGS = frozenset({"details", "summary", "div", "span", "br", "pre", "code", "sub", "sup", "b", "i",
                          "em", "strong", "p", "hr", "table", "thead", "tbody", "tr", "th", "td", "ul", "ol", "li"})
_SAFE_STYLE_RE = re.compile(r"^[A-Za-z0-9#:;.,()% -]*$")
_ALLOWED_TAG_RE = re.compile(r'<(/?)([A-Za-z][A-Za-z0-9]*)(\s+style="([^"<>]*)")?\s*/?>')
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _is_allowed_tag(match: "re.Match[str]") -> bool:
    closing, name, style_attr, style = match.groups()
    if name.lower() not in ALLOWED_TAGS:
        return False
    if style_attr and (closing or not _SAFE_STYLE_RE.match(style) or re.search(r"url|expression", style, re.I)):
        return False
    return True


_CODE_OR_TAG_RE = re.compile(r"(?<!\\)(?:\\\\)*(`+)|<(?=[A-Za-z/!?])")


def _code_span_end(line: str, start: int, run: str) -> int:
    """End of an inline code span opened by `run` at `start` (-1 when it is not closed on this line)."""
    for match in re.finditer(r"`+", line[start + len(run):]):
        if match.group(0) == run:
            return start + len(run) + match.end()
    return -1


def escape_disallowed_tags(line: str) -> str:
    """Every `<` that opens something other than an allowed tag becomes `&lt;`; inline code
    spans closed on the same line are left as they are (their text is literal)."""
    out: List[str] = []
    position = 0
    while True:
        match = _CODE_OR_TAG_RE.search(line, position)
        if match is None:
            break
        if match.group(1):
            run_start = match.start(1)
            end = _code_span_end(line, run_start, match.group(1))
            out.append(escape_html_elements(line[position:end]) if end >= 0 else line[position:match.end(1)])
            position = end if end >= 0 else match.end(1)
            continue
        start = match.start()
        allowed = _ALLOWED_TAG_RE.match(line, start)
        out.append(line[position:start])
        if allowed and _is_allowed_tag(allowed):
            out.append(allowed.group(0))
            position = allowed.end()
        else:
            out.append("&lt;")
            position = start + 1
    out.append(line[position:])
    return "".join(out)


def _fence_opening(line: str, previous_blank: bool) -> Optional[Tuple[str, int]]:
    """(fence char, length) when `line` opens a code fence the way every renderer agrees on.

    A fence right after a non-blank line may belong to an HTML block (then it is no fence),
    so only fences after a blank line (or another fence) count: in doubt, text is treated
    as outside code and escaped."""
    match = _FENCE_RE.match(line)
    if not match or not previous_blank:
        return None
    run, info = match.groups()
    if run[0] == "`" and "`" in info:
        return None
    return run[0], len(run)


def _closes_fence(line: str, fence: Tuple[str, int]) -> bool:
    match = _FENCE_RE.match(line)
    if not match:
        return False
    run, rest = match.groups()
    return run[0] == fence[0] and len(run) >= fence[1] and not rest.strip()


def sanitize_markdown(text: str) -> str:
    """Markdown from outside: tags other than `ALLOWED_TAGS` escaped outside code fences,
    no pipeline command, an unclosed fence closed at the end."""
    lines = _LINE_BREAK_RE.split(text)
    out: List[str] = []
    fence: Optional[Tuple[str, int]] = None
    previous_blank = True
    for line in lines:
        if fence is not None:
            out.append(escape_html_elements(line))
            if _closes_fence(line, fence):
                fence = None
                previous_blank = True
            continue
        opening = _fence_opening(line, previous_blank)
        if opening is not None:
            fence = opening
            out.append(line)
            continue
        out.append(escape_disallowed_tags(line))
        previous_blank = not line.strip()
    if fence is not None:
        out.append(fence[0] * fence[1])
    return neutralize_commands("\n".join(out))
