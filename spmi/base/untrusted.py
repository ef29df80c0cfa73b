"""Text from outside the suite, made harmless where it lands (docs/architecture.md, "Untrusted text").

* `neutralize_commands`: console text never carries an Azure Pipelines logging command
  (`##vso[`, `##[` anywhere in a line) nor a GitHub workflow command (`::` at a line start,
  after any Unicode whitespace); every Unicode line break ends a line.
* `one_line`: line breaks and other control characters become spaces; `console_line`: one
  line without a command (for a value printed on its own).
* `escape_md_inline`: THE escape for an untrusted value in a line of markdown (table cell,
  option list, name after a heading marker): HTML-escaped, table pipes, emphasis, code-span
  and link characters escaped, a leading heading/list/quote marker escaped, one line.
  `escape_md_code`: the same value as an inline code span.
* `sanitize_markdown`: markdown written by a work item or a tool: only the suite's own
  tags (`ALLOWED_TAGS`) stay raw, and only balanced (a closing tag that closes nothing is
  escaped, tags left open are closed at the end); links go only to http(s), mailto and
  `#` targets; fenced code is left as is.
"""
from __future__ import annotations

import functools
import html
import re
from typing import FrozenSet, List, Optional, Sequence, Tuple

#: every line break some reader splits on (`str.splitlines`: LF, CR, VT, FF, FS, GS, RS, NEL, LS, PS)
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: characters a runner may trim besides `str.isspace()` ones (zero-width and BOM)
INVISIBLE_SPACE = "\u180e\u200b\u200c\u200d\u2060\ufeff"

# A visible marker that breaks the prefix: the agent and the runner no longer see a command.
_AZDO_PREFIX_RE = re.compile(r"##(vso)?\[", re.IGNORECASE)
# At a line start: any whitespace `str.isspace()` knows (`\s` in a str pattern), or an invisible space.
_GITHUB_LINE_START_RE = re.compile(r"^((?:[^\S\n]|[" + INVISIBLE_SPACE + r"])*)::", re.MULTILINE)
_LINE_BREAK_RE = re.compile(r"\r\n|[" + LINE_BREAKS + r"]")


def _break_azdo_prefix(match: "re.Match[str]") -> str:
    return "##" + (match.group(1) or "") + "\uff3b"  # FULLWIDTH LEFT SQUARE BRACKET


def break_azdo_prefixes(text: str) -> str:
    """`##vso[`/`##[` anywhere broken; nothing else changed (for values that are escaped to one line anyway)."""
    return _AZDO_PREFIX_RE.sub(_break_azdo_prefix, text)


def neutralize_commands(text: str) -> str:
    """`text` for the console: no `##vso[`/`##[` anywhere, no line starting with `::` after
    any whitespace.

    Line structure is kept (every Unicode line break, a bare CR too, becomes LF, so what the
    agent or runner sees as a line is what was checked)."""
    text = _LINE_BREAK_RE.sub("\n", text)
    text = break_azdo_prefixes(text)
    return _GITHUB_LINE_START_RE.sub(lambda m: m.group(1) + ":\u200b:", text)


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(text: object) -> str:
    """Every line break (CR, LF, NEL, LS, PS, ...) and other control character becomes a space."""
    return _CONTROL_RE.sub(" ", str(text))


def clip(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, then "..." where it was cut (a message quoting text of any
    length from outside)."""
    return text if len(text) <= limit else text[:limit] + "..."


def console_line(text: object) -> str:
    """An untrusted value printed as one console line: one line, no pipeline command."""
    return neutralize_commands(one_line(text))


_MD_INLINE_RE = re.compile(r"([\\`*|\[\]~])")
_MD_LINE_START_RE = re.compile(r"^(\s*)([#>+=-]|\d+[.)])")
_UNDERSCORE_EDGE_RE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def escape_html_inline(text: object) -> str:
    """Untrusted text inside an HTML element that is not markdown (`<summary>`): one line,
    `&<>"` escaped, no pipeline command."""
    flat = neutralize_commands(" ".join(one_line(text).split()))
    return html.escape(flat, quote=False).replace('"', "&quot;")


def escape_md_inline(text: object, line_start: bool = False) -> str:
    """Untrusted text inside a line of markdown (table cell, JIT options, list item, after a
    heading marker): HTML-escaped, markdown punctuation escaped, one line; with `line_start`,
    a leading heading/list/quote marker is escaped too. Every markdown writer uses this one."""
    escaped = _MD_INLINE_RE.sub(r"\\\1", escape_html_inline(text))
    escaped = _UNDERSCORE_EDGE_RE.sub(r"\\_", escaped)
    if line_start:
        escaped = _MD_LINE_START_RE.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)
    return escaped


def escape_md_code(text: object) -> str:
    """Untrusted text as an inline code span that stays one span: one line, no backtick
    inside (`'` instead), no pipeline command, no `<` that opens an HTML element."""
    flat = " ".join(one_line(text).replace("`", "'").split())
    return "`" + escape_html_elements(neutralize_commands(flat)) + "`"


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
VOID_TAGS = frozenset({"br", "hr"})
_SAFE_STYLE_RE = re.compile(r"^[A-Za-z0-9#:;.,()% -]*$")
_ALLOWED_TAG_RE = re.compile(r'<(/?)([A-Za-z][A-Za-z0-9]*)(\s+style="([^"<>]*)")?\s*(/?)>')
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _is_allowed_tag(match: "re.Match[str]", allowed_tags: FrozenSet[str] = ALLOWED_TAGS) -> bool:
    closing, name, style_attr, style, _ = match.groups()
    if name.lower() not in allowed_tags:
        return False
    if style_attr and (closing or not _SAFE_STYLE_RE.match(style) or re.search(r"url|expression", style, re.I)):
        return False
    return True


def _keeps_balance(match: "re.Match[str]", open_tags: List[str]) -> bool:
    """An allowed tag stays only if the tags stay balanced: a closing tag must close the
    innermost open one (so the text cannot close the page's own sections), `<x/>` is
    refused for non-void tags (browsers read it as an opening tag); `open_tags` is updated."""
    closing, name, self_closing = match.group(1), match.group(2).lower(), match.group(5)
    if name in VOID_TAGS:
        return not closing
    if self_closing:
        return False
    if not closing:
        open_tags.append(name)
        return True
    if open_tags and open_tags[-1] == name:
        open_tags.pop()
        return True
    return False


# Link targets a reader may follow: web and mail addresses, anchors, plain relative names;
# anything else with a scheme, entity, percent or backslash character (`javascript:`,
# `jav&#97;script:`, `javascript\:`) is refused, and so is a target left for the next line.
_SAFE_LINK_RE = re.compile(r"(?:https?://|mailto:|#)", re.IGNORECASE)
_SCHEME_HINT_RE = re.compile(r"[:&%\\]")
_INLINE_LINK_RE = re.compile(r"(?<!\\)((?:\\\\)*)\](\(\s*<?\s*)([^\s)>]*)")
_REFERENCE_DEFINITION_RE = re.compile(r"(?<!\\)((?:\\\\)*)(\[[^\]]*\]:\s*<?\s*)(\S*)")


def is_safe_link_target(target: str, rest: str = ")") -> bool:
    """`target` (what follows the link's `(` or the definition's `:`; `rest` the text after it)."""
    if not target:
        return rest.lstrip().startswith((")", '"', "'"))
    return bool(_SAFE_LINK_RE.match(target)) or not _SCHEME_HINT_RE.search(target)


def neutralize_unsafe_links(line: str) -> str:
    """`[text](target)`, `![alt](target)` and `[ref]: target` whose target is not safe lose their
    link syntax (the bracket is escaped): the text stays readable, nothing can be clicked."""
    def inline(match: "re.Match[str]") -> str:
        if is_safe_link_target(match.group(3), line[match.end():]):
            return match.group(0)
        return match.group(1) + "\\]" + match.group(2) + match.group(3)

    def definition(match: "re.Match[str]") -> str:
        if is_safe_link_target(match.group(3), line[match.end():] or "x"):
            return match.group(0)
        return match.group(1) + "\\" + match.group(2) + match.group(3)

    return _REFERENCE_DEFINITION_RE.sub(definition, _INLINE_LINK_RE.sub(inline, line))


_CODE_OR_TAG_RE = re.compile(r"(?<!\\)(?:\\\\)*(`+)|<(?=[A-Za-z/!?])")


def _code_span_end(line: str, start: int, run: str) -> int:
    """End of an inline code span opened by `run` at `start` (-1 when it is not closed on this line)."""
    for match in re.finditer(r"`+", line[start + len(run):]):
        if match.group(0) == run:
            return start + len(run) + match.end()
    return -1


def escape_disallowed_tags(line: str, open_tags: Optional[List[str]] = None,
                           allowed_tags: FrozenSet[str] = ALLOWED_TAGS) -> str:
    """Every `<` that opens something other than an allowed, balanced tag becomes `&lt;`;
    inline code spans closed on the same line are left as they are (their text is literal).
    `open_tags` carries the open allowed tags from line to line."""
    open_tags = [] if open_tags is None else open_tags
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
        if allowed and _is_allowed_tag(allowed, allowed_tags) and _keeps_balance(allowed, open_tags):
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


class FenceWalk:
    """Which lines of a markdown document are code fences, line by line (the rule of `_fence_opening`)."""

    OPENING = "opening"
    CODE = "code"

    def __init__(self) -> None:
        self.fence: Optional[Tuple[str, int]] = None
        self.previous_blank = True

    def step(self, line: str) -> Optional[str]:
        """`OPENING` for a line that opens a fence, `CODE` for one inside it (its closing line too),
        None for a line outside code."""
        if self.fence is not None:
            if _closes_fence(line, self.fence):
                self.fence, self.previous_blank = None, True
            return self.CODE
        opening = _fence_opening(line, self.previous_blank)
        if opening is not None:
            self.fence = opening
            return self.OPENING
        self.previous_blank = not line.strip()
        return None


@functools.lru_cache(maxsize=512)  # pure; a summary fitted to its size limit renders the same texts again
def sanitize_markdown(text: str, allowed_tags: FrozenSet[str] = ALLOWED_TAGS) -> str:
    """Markdown from outside: outside code fences, tags other than `allowed_tags` (default
    `ALLOWED_TAGS`) and unbalanced ones escaped, unsafe links unlinked; no pipeline command; an
    unclosed fence, and tags left open, closed at the end (the text can neither close nor swallow
    what follows it)."""
    out: List[str] = []
    open_tags: List[str] = []
    walk = FenceWalk()
    for line in _LINE_BREAK_RE.split(text):
        kind = walk.step(line)
        if kind == FenceWalk.CODE:
            out.append(escape_html_elements(line))
        elif kind == FenceWalk.OPENING:
            out.append(line)
        else:
            out.append(escape_disallowed_tags(neutralize_unsafe_links(line), open_tags, allowed_tags))
    if walk.fence is not None:
        out.append(walk.fence[0] * walk.fence[1])
    if open_tags:
        out.extend(["", "".join(f"</{name}>" for name in reversed(open_tags))])
    return neutralize_commands("\n".join(out))


# ---------------------------------------------------------------- text bound for GitHub

#: the tags a PR comment keeps from a summary: its collapsible sections, their indent, coloured numbers, emphasis
GITHUB_COMMENT_TAGS = frozenset({"details", "summary", "div", "span", "br", "b", "i", "em", "strong", "code", "sub", "sup"})
_MENTION_RE = re.compile(r"@(?=[A-Za-z0-9_])")
_REFERENCE_RE = re.compile(r"#(?=[0-9]+\b)")
_GH_REFERENCE_RE = re.compile(r"\b(GH)-(?=[0-9]+\b)", re.IGNORECASE)
_ENTITY_RE = re.compile(r"&(?=#|commat;|num;)", re.IGNORECASE)
# a tag (kept as it is: after `sanitize_markdown` a kept tag is one of the summary's own exact shapes)
_TAG_RE = re.compile(r"<[A-Za-z/][^<>]*>")
WORD_JOINER = "\u2060"


def _inert_text(text: str) -> str:
    text = _ENTITY_RE.sub("&amp;", text)
    text = _MENTION_RE.sub("@" + WORD_JOINER, text)
    text = _REFERENCE_RE.sub("#" + WORD_JOINER, text)
    return _GH_REFERENCE_RE.sub(lambda m: m.group(1) + WORD_JOINER + "-", text)


def inert_for_github(text: str) -> str:
    """Text a bot did not write, made inert for GitHub (docs/contracts.md §15): no `@user` or
    `@org/team` mention, no `#123`, `owner/repo#123` or `GH-123` reference (a word joiner after
    `@`/`#`/`GH`), no character reference that could spell one (`&#64;`, `&commat;` lose their `&`).
    The text reads the same. Code spans and fences get the same treatment: where GitHub's markdown
    starts and ends code (spans across lines, fences after a paragraph or inside a list item) is not
    decided here, so nothing is left live on the guess that it is code. Only tags are left as they are."""
    pieces: List[str] = []
    position = 0
    for match in _TAG_RE.finditer(text):
        pieces += [_inert_text(text[position:match.start()]), match.group()]
        position = match.end()
    pieces.append(_inert_text(text[position:]))
    return "".join(pieces)


def sanitize_for_github(text: str) -> str:
    """A summary republished in a PR comment: `sanitize_markdown` keeping only `GITHUB_COMMENT_TAGS`,
    then `inert_for_github`."""
    return inert_for_github(sanitize_markdown(text, GITHUB_COMMENT_TAGS))
