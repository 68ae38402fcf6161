"""A prompt's lines read by their shape, whatever their words or script: the documents are
the blocks that open with a mark of one shape repeated with varying content, and the
question is what a prompt sets apart and asks.

- **A line's shape** (`shape_of`): its mark with the variable part abstracted. A number
  (`1.`, `2)`, `3、`), a bracket (`[1]`, `[kb/a.md]`, `【1】`, `「a」`: any opening and
  closing punctuation), a tag (`<doc id="a">`, `<问题>`), a bullet (`-`, `*`, `•`: one
  punctuation or symbol and a space), a label before a colon (`Source:`, `文档1：`,
  `المصدر:`: a few words, any colon Unicode names so), a bullet before a label (a YAML
  item, `- id: a`), a separator (`-----`), a row of a delimited table (`id,text`). Digits
  become `9`, so `[1]` and `[2]` are one shape; a label's words stay, so `Source:` and
  `Content:` are two.
- **Sections**: a label line with nothing after its colon that the text holds once
  (`Context:`, `已知信息：`), or a bracketed word alone on its line (`【已知信息】`), heads
  the lines after it; a tag the text opens once wraps the lines up to its closing tag
  (`<已知信息>…</已知信息>`).
- **Documents**: in a section, the shape that repeats (twice at least, its content
  varying; a mark that names its block once: a bracket of one word, a tag with an
  attribute, a numbered label) opens a block each time. Inside the blocks, a
  label or tag that every block repeats is a field: the field with the most text is the
  document's text, a field whose values are single words in every block names it
  (`doc_uri`), the others are left out. A bracket's or a tag's label names its block too
  (a number is a position: the retrieval's n-th id). A table's rows are documents, the
  column with the most text theirs, a column of single words their names.
- **The question** (`asked_in`): the last section, tag or labelled line the text holds
  once whose text ends with a question mark (any script's: Unicode names it so), else
  the last label of any count whose text asks (earlier turns joined into one prompt
  repeat theirs), else a bare line that asks beside documents laid out by structure,
  else the last text of one line under a label of a word or two (`Question:`, `<问题>`).

Every scan is linear in the text: no regular expression runs over it.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from monitor.extraction._span_values import loads

_MAX_LABEL = 40  # characters of a label before its colon
_MAX_LABEL_WORDS = 4
_MAX_BRACKET = 64  # characters inside a bracket mark
_MAX_TAG = 256  # characters of an opening tag
_MIN_SEPARATOR = 3
_DELIMITERS = ",\t|;"  # a table's column delimiters


@lru_cache(maxsize=8192)
def _name(c: str) -> str:
    return unicodedata.name(c, "")


def is_colon(c: str) -> bool:
    return c == ":" or _name(c).endswith(" COLON")


def asks(text: str) -> bool:
    """Whether `text` ends with a question mark of any script (`?`, `？`, `؟`, `;`)."""
    at = len(text) - 1
    # Past closing quotes and brackets after the mark, and spaces.
    while at >= 0 and (text[at].isspace() or unicodedata.category(text[at]) in ("Pe", "Pf")):
        at -= 1
    return at >= 0 and "QUESTION MARK" in _name(text[at]) and text[at] != "¿"


def ends_sentence(text: str) -> bool:
    """Whether `text` ends as a sentence does: a full stop, question or exclamation mark of
    any script, or a closing quote or bracket; not a colon or a comma."""
    last = text.rstrip()[-1:]
    if not last:
        return False
    category = unicodedata.category(last)
    if category in ("Pe", "Pf"):
        return True
    return category == "Po" and not is_colon(last) and "COMMA" not in _name(last)


@dataclass(slots=True)
class Line:
    raw: str
    shape: str = ""  # "" blank, "text" unmarked, else the mark's shape
    label: str | None = None  # what the mark names: a number, a bracket's text, a tag's id
    rest: str = ""  # the text after the mark
    key: str | None = None  # a named label's or a tag's name: a field of a block
    closes: str | None = None  # the tag this line closes at its end


def _tag(s: str) -> Line | None:
    """`<name attr="v">rest</name>`, `</name>`, or None."""
    closing = s[1:2] == "/"
    i = 2 if closing else 1
    n = i
    while n < len(s) and n < _MAX_TAG and (s[n].isalnum() or s[n] in "_-.:"):
        n += 1
    name = s[i:n]
    end = s.find(">", n, _MAX_TAG)
    if not name or not name[0].isalpha() or end < 0:
        return None
    if closing:
        return Line(s, "</" + name.casefold() + ">", closes=name)
    if s[end - 1] == "/":
        return None  # a self-closing tag holds no text
    attributes = _attributes(s[n:end])
    label = next((v for v in attributes if not v.isdigit()), None) or next(iter(attributes), None)
    rest = s[end + 1 :]
    closes = None
    close = "</" + name + ">"
    if rest.rstrip().endswith(close):
        rest, closes = rest.rstrip()[: -len(close)], name
    return Line(s, "<" + name.casefold() + ">", label, rest.strip(), name.casefold(), closes)


def _attributes(text: str) -> list[str]:
    """The quoted values of a tag's attributes (`id="a" n='1'`), in order."""
    values: list[str] = []
    i = text.find("=")
    while i >= 0 and i + 1 < len(text):
        quote = text[i + 1]
        if quote in "\"'":
            end = text.find(quote, i + 2)
            if end < 0:
                break
            values.append(text[i + 2 : end].strip())
            i = text.find("=", end)
        else:
            i = text.find("=", i + 1)
    return [v for v in values if v]


def _bracket(s: str) -> Line | None:
    end = next(
        (i for i in range(1, min(len(s), _MAX_BRACKET + 2)) if unicodedata.category(s[i]) == "Pe"),
        -1,
    )
    inner = s[1:end].strip() if end > 0 else ""
    if not inner or any(unicodedata.category(c) == "Ps" for c in inner):
        return None
    rest = s[end + 1 :]
    if rest[:1] and unicodedata.category(rest[0]).startswith("P"):
        rest = rest[1:]  # `[1]:`, `[1].`
    if inner.isdecimal():
        return Line(s, s[0] + "9" + s[end], str(int(inner)), rest.strip())
    return Line(s, s[0] + "x" + s[end], inner, rest.strip(), inner.casefold())


def _number(s: str) -> Line | None:
    n = 0
    while n < len(s) and n < 4 and s[n].isdecimal():
        n += 1
    if n == 0 or n >= len(s) or n == 4:
        return None
    mark = s[n]
    after = s[n + 1 : n + 2]
    if not unicodedata.category(mark).startswith("P") or is_colon(mark) or after.isdecimal():
        return None
    if after and not after.isspace() and unicodedata.category(mark) != "Po":
        return None
    number = str(int(s[:n]))
    return Line(s, "9" + unicodedata.normalize("NFKC", mark), number, s[n + 1 :].strip())


def _label(s: str) -> Line | None:
    """`Label: rest` (a few words before a colon of any script), or None."""
    at = next((i for i, c in enumerate(s[: _MAX_LABEL + 1]) if is_colon(c)), -1)
    if at <= 0:
        return None
    label = s[:at].strip()
    after = s[at + 1 : at + 2]
    if (
        not label
        or after.isdecimal()
        or after == "/"
        or label.count(" ") >= _MAX_LABEL_WORDS
        or any(unicodedata.category(c) in ("Po", "Pi", "Pf") and c not in "#/" for c in label)
    ):
        return None
    rest = s[at + 1 :].strip()
    digits = "".join(c for c in label if c.isdecimal())
    if digits:
        shape = "".join("9" if c.isdecimal() else c for c in label.casefold())
        return Line(s, _collapse_nines(shape) + ":", str(int(digits)), rest)
    key = label.casefold()
    return Line(s, key + ":", None, rest, key)


def _collapse_nines(shape: str) -> str:
    out: list[str] = []
    for c in shape:
        if not (c == "9" and out and out[-1] == "9"):
            out.append(c)
    return "".join(out)


def _separator(s: str) -> bool:
    return (
        len(s) >= _MIN_SEPARATOR
        and s.count(s[0]) == len(s)
        and unicodedata.category(s[0])[0] in "PS"
    )


def shape_of(raw: str, ids: tuple[str, ...] = ()) -> Line:
    """A line's shape and what its mark carries (see the module docstring)."""
    s = raw.strip()
    line = _shape(s, ids) if s else Line(raw)
    line.raw = raw
    return line


def _shape(s: str, ids: tuple[str, ...]) -> Line:
    if s[0] == "<":
        return _tag(s) or Line(s, "text", rest=s)
    if _separator(s):
        return Line(s, "sep")
    if unicodedata.category(s[0]) == "Ps":
        found = _bracket(s)
        if found is not None:
            return found
    for doc_id in ids:
        if doc_id and s.startswith(doc_id) and not s[len(doc_id) : len(doc_id) + 1].isalnum():
            return Line(s, "id", doc_id, s[len(doc_id) :].lstrip(" :-)]\t"))
    if s[0].isdecimal():
        found = _number(s)
        if found is not None:
            return found
    if unicodedata.category(s[0])[0] in "PS" and s[1:2].isspace():
        inner = _label(s[2:].strip())
        if inner is not None:  # a YAML item: `- id: a`
            inner.shape = s[0] + " " + inner.shape
            return inner
        return Line(s, s[0] + " ", rest=s[2:].strip())
    return _label(s) or Line(s, "text", rest=s)


def is_heading(text: str) -> bool:
    """A line that only heads what follows: a label with nothing after its colon."""
    line = shape_of(text)
    return line.shape.endswith(":") and not line.rest and "\n" not in text.strip()


# -- blocks ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Block:
    lines: list[str]
    label: str | None = None  # what names it: a number, an id, a tag's or a field's value
    content: str | None = None  # its text, where it is not its lines
    structured: bool = False  # opened by a repeated mark (not a blank-line block)
    bullet: bool = False  # a list item without a name (a bullet's, a bare number's)
    end: int = 0  # the section's lines up to here are read (a repeated mark's blocks)


@dataclass(slots=True)
class Section:
    lines: list[Line]
    head: str | None = None  # the heading label or the tag that wraps it
    one_line: bool = False  # its text is one line (a labelled or tagged value)
    start: int = 0  # the line it begins on


def sections(lines: list[Line], values: bool = False) -> list[Section]:
    """The lines grouped under their headings and wrapping tags (see the module docstring);
    with `values`, a label the text holds once with its text on its line is a section of
    that one line too (`问题：...`)."""
    _keyed(lines)
    # A bracketed word alone on its line heads what follows (`【已知信息】`).
    heads = {n for n, line in enumerate(lines) if _bracketed(line) and line.label and not line.rest}
    counts = Counter(line.shape for n, line in enumerate(lines) if n not in heads)
    for n in heads:
        counts[f"{n}\x00"] = 1
    closings = _closings(lines)
    out: list[Section] = [Section([])]
    i = 0
    while i < len(lines):
        line = lines[i]
        once = counts[f"{i}\x00" if i in heads else line.shape] == 1
        if once and line.key is not None and line.shape.startswith("<") and line.label is None:
            close = i if line.closes is not None else _closing(closings, i, line.key)
            if close is not None:
                inner = [shape_of(line.rest)] if line.rest else []
                if close > i:
                    inner += lines[i + 1 : close]
                    tail = _before_close(lines[close].raw, line.key)
                    if tail.strip():
                        inner.append(shape_of(tail))
                out.append(Section(inner, line.key, len(inner) == 1, i))
                out.append(Section([], start=close + 1))
                i = close + 1
                continue
        if once and line.key is not None and (line.shape.endswith(":") or _bracketed(line)):
            if not line.rest:
                out.append(Section([], line.key, start=i))
                i += 1
                continue
            if values:
                out.append(Section([shape_of(line.rest)], line.key, True, i))
                out.append(Section([], start=i + 1))
                i += 1
                continue
        out[-1].lines.append(line)
        i += 1
    return [s for s in out if s.head is not None or any(line.shape for line in s.lines)]


def _bracketed(line: Line) -> bool:
    return unicodedata.category(line.shape[:1] or " ") == "Ps"


def _keyed(lines: list[Line]) -> None:
    """Bracketed words a text repeats (`【来源】 a` … `【来源】 b`) are labels of a field,
    not names: their shape keeps the word, as a label before a colon does."""
    repeated = Counter(line.key for line in lines if _bracketed(line) and line.label)
    for line in lines:
        if _bracketed(line) and line.label and line.key and repeated[line.key] > 1:
            line.shape = line.shape[0] + line.key + line.shape[-1]
            line.label = None


def _closings(lines: list[Line]) -> dict[str, list[int]]:
    """The lines each tag is closed on (a line that ends with `</name>`), in order."""
    found: dict[str, list[int]] = {}
    for n, line in enumerate(lines):
        raw = line.raw.rstrip()
        if not raw.endswith(">"):
            continue
        at = raw.rfind("</", max(0, len(raw) - _MAX_TAG))
        if at >= 0:
            found.setdefault(raw[at + 2 : -1].casefold(), []).append(n)
    return found


def _closing(closings: dict[str, list[int]], at: int, key: str) -> int | None:
    after = closings.get(key, [])
    k = bisect.bisect_left(after, at)
    return after[k] if k < len(after) else None


def _closes(raw: str, key: str) -> bool:
    return raw.rstrip().casefold().endswith("</" + key + ">")


def _before_close(raw: str, key: str) -> str:
    at = raw.casefold().rfind("</" + key + ">")
    return raw[:at] if at >= 0 else raw


@dataclass(slots=True)
class _Seen:
    """What one shape's lines in a section show: how many, the first, whether one names
    its block, and (two at most) the distinct texts and the distinct lines after them."""

    count: int
    first: int
    named: bool
    texts: set[int]
    after: set[int]
    id_like: bool = True  # every label a number or a word without spaces (`kb/a.md`)


def _opener(lines: list[Line]) -> str | None:
    """The shape that opens the section's blocks: one that repeats with varying content
    (a mark that names its block may stand once); named marks before bullets, then the
    most frequent, then the first."""
    seen: dict[str, _Seen] = {}
    previous: _Seen | None = None
    for n, line in enumerate(lines):
        if not line.shape:
            continue
        if previous is not None and len(previous.after) < 2:
            previous.after.add(hash(line.raw))
        previous = None
        if line.shape == "text" or line.shape == "sep" or line.shape.startswith("</"):
            continue
        own = seen.get(line.shape)
        if own is None:
            own = seen[line.shape] = _Seen(0, n, False, set(), set())
        own.count += 1
        own.named = own.named or bool(line.label)
        own.id_like = own.id_like and (line.label is None or len(line.label.split()) == 1)
        if len(own.texts) < 2:
            own.texts.add(hash((line.label, line.rest)))
        previous = own
    best: tuple[int, int, int] | None = None
    chosen = None
    for shape, own in seen.items():
        # One mark that names its block may stand alone (`[1]`, `[kb/a.md]`, `<doc id=…>`,
        # `Doc 1:`); a parenthesis of words opening a line of prose does not.
        single = shape == "id" or shape[0] == "<" or (shape.endswith(":") and "9" in shape)
        single = single or (unicodedata.category(shape[0]) == "Ps" and own.id_like)
        if own.count < 2 and not (single and own.named):
            continue
        if own.count >= 2 and len(own.texts) < 2 and len(own.after) < 2:
            continue  # the same line each time, the same line after it: the template's
        score = (int(own.named), own.count, -own.first)
        if best is None or score > best:
            best, chosen = score, shape
    return chosen


def structured_blocks(lines: list[Line]) -> list[Block] | None:
    """A section's blocks opened by its repeated shape, with their names and fields, or
    None when no shape repeats."""
    _keyed(lines)
    _items(lines)
    table = _table(lines)
    if table is not None:
        return table
    between = _between_separators(lines)
    if between is not None:
        return between
    opener = _opener(lines)
    if opener is None:
        return None
    openings = [n for n, line in enumerate(lines) if line.shape == opener]
    counts = Counter(line.shape for line in lines)
    raw: list[list[Line]] = []
    for k, start in enumerate(openings):
        stop = openings[k + 1] if k + 1 < len(openings) else len(lines)
        block = [lines[start]]
        tag = lines[start].key if opener.startswith("<") else None
        closed = lines[start].closes is not None
        last = k + 1 == len(openings)
        blanks = 0
        inner_blanks = max((_inner_blanks(b) for b in raw), default=0) if last else 0
        for line in lines[start + 1 : stop]:
            if closed:
                break
            if tag is not None:
                if _closes(line.raw, tag):
                    tail = _before_close(line.raw, tag)
                    if tail.strip():
                        block.append(shape_of(tail))
                    break
            elif _mark(line) and counts[line.shape] < len(openings):
                break  # a mark the blocks do not share: what follows them
            elif last and not line.shape and (block[0].rest or any(b.shape for b in block[1:])):
                # After the last block, a blank line ends it, past as many as the others hold.
                blanks += 1
                if blanks > inner_blanks:
                    break
            block.append(line)
        raw.append(block)
        end = start + len(block)
    blocks = _fielded(raw, opener)
    blocks[-1].end = end
    return blocks


def _mark(line: Line) -> bool:
    """A line whose mark ends a block it does not open: any mark but a label followed by
    text (a document's own line may read `Note: ...`)."""
    if line.shape in ("", "text"):
        return False
    return not (line.shape.endswith(":") and line.rest)


def _items(lines: list[Line]) -> None:
    """A list item whose text opens like a label (`- Honey never spoils: ...`) where no
    other item has that label: an item like the others, its text whole."""
    counts = Counter(line.shape for line in lines)
    for line in lines:
        if line.shape[1:2] == " " and len(line.shape) > 2 and counts[line.shape] == 1:
            line.shape, line.key, line.label = line.shape[:2], None, None
            line.rest = line.raw.strip()[2:].strip()


def _inner_blanks(block: list[Line]) -> int:
    shown = [n for n, line in enumerate(block) if line.shape]
    return sum(1 for line in block[: shown[-1]] if not line.shape) if shown else 0


def _fielded(raw: list[list[Line]], opener: str) -> list[Block]:
    """Blocks whose lines carry fields that every block repeats: the text is the field with
    most text, the name a field of single words."""
    shared = None
    for block in raw:
        keys = {line.key for line in block[1:] if line.key is not None}
        if block[0].key is not None and not opener.startswith("<"):
            keys.add(block[0].key)
        shared = keys if shared is None else shared & keys
    fields = shared or set()
    values: list[dict[str, list[str]]] = []
    for block in raw:
        own: dict[str, list[str]] = {}
        current: str | None = None
        head = block[0]
        if head.key in fields and not opener.startswith("<"):
            current = head.key
        own.setdefault(current or "", [])
        if head.rest:
            own[current or ""].append(head.rest)
        inline = bool(head.rest)
        for line in block[1:]:
            if line.key in fields and line.key is not None:
                current, inline = line.key, bool(line.rest)
                own.setdefault(current, [])
                if line.rest:
                    own[current].append(line.rest)
                continue
            if line.shape.startswith("</"):
                continue
            if not line.shape and inline:
                current = None  # a blank line ends a value written on its label's line
            own.setdefault(current or "", []).append(line.raw if line.shape else "")
        values.append(own)
    total: Counter[str] = Counter()
    for own in values:
        for key, texts in own.items():
            total[key] += sum(len(t) for t in texts)
    text_key = max(total, key=lambda k: total[k]) if total else ""
    order = dict.fromkeys([raw[0][0].key] if raw and raw[0][0].key in fields else [])
    order.update(dict.fromkeys(line.key for line in raw[0] if line.key in fields))
    name_key = next(
        (
            key
            for key in order
            if key is not None
            and key != text_key
            and all(len(" ".join(own.get(key, [])).split()) == 1 for own in values)
        ),
        None,
    )
    blocks = []
    for block, own in zip(raw, values, strict=True):
        text = "\n".join(own.get(text_key, [])).strip()
        label = block[0].label
        if name_key is not None:
            label = " ".join(own.get(name_key, [])).strip() or label
        # A list item: a bullet's, or a bare number's (`1.`, `2)`), named by nothing else.
        bullet = (opener.endswith(" ") and label is None) or (
            opener[0] == "9" and (label is None or label.isdecimal())
        )
        blocks.append(Block([b.raw for b in block], label, text, True, bullet))
    return blocks


def _between_separators(lines: list[Line]) -> list[Block] | None:
    """The texts between separator lines (`-----`), when two separators at least hold
    text between them."""
    marks = [n for n, line in enumerate(lines) if line.shape == "sep"]
    if len(marks) < 2:
        return None
    blocks = []
    for a, b in itertools.pairwise(marks):
        body = [line.raw for line in lines[a + 1 : b] if line.shape]
        if body:
            blocks.append(Block(body, content="\n".join(body).strip(), structured=True))
    return blocks if len(blocks) >= 2 else None


def _table(lines: list[Line]) -> list[Block] | None:
    """A delimited table (a header row of single words, then rows of as many columns): a
    document a row, its text the column with most text, its name a column of single
    words. The table is a paragraph of its own, a line before its header at most: a table
    inside a document's prose is the document's."""
    paragraph: list[str] = []
    for line in [*lines, Line("")]:
        if line.shape:
            paragraph.append(line.raw.strip())
            continue
        found = _table_of(paragraph) if len(paragraph) >= 3 else None
        if found is not None:
            return found
        paragraph = []
    return None


def _table_of(body: list[str]) -> list[Block] | None:
    for delimiter in _DELIMITERS:
        try:
            rows = [next(csv.reader([text], delimiter=delimiter)) for text in body[:2]]
        except csv.Error:
            return None  # a field past the csv module's limit: no table of documents
        start = 0 if len(rows[0]) >= 2 else 1
        header = rows[start]
        if len(header) < 2 or any(len(h.split()) != 1 for h in header):
            continue
        try:
            rows = [next(csv.reader([text], delimiter=delimiter)) for text in body[start + 1 :]]
        except csv.Error:
            return None
        if len(rows) >= 2 and all(len(row) == len(header) for row in rows):
            return _rows(body[start + 1 :], rows)
    return None


def _rows(texts: list[str], rows: list[list[str]]) -> list[Block]:
    columns = list(zip(*rows, strict=True))
    text = max(range(len(columns)), key=lambda c: sum(len(v) for v in columns[c]))
    name = next(
        (
            c
            for c in range(len(columns))
            if c != text and all(len(v.split()) == 1 for v in columns[c])
        ),
        None,
    )
    return [
        Block([raw], row[name] if name is not None else None, row[text], True)
        for raw, row in zip(texts, rows, strict=True)
    ]


# -- the question ---------------------------------------------------------------------------


def asked_in(message: str) -> str | None:
    """The question a prompt sets apart (see the module docstring), or None."""
    lines = [shape_of(raw) for raw in message.splitlines()]
    parts = sections(lines, values=True)
    labelled = [
        (section.start, _last_paragraph(section.lines))
        for section in parts
        if section.head is not None and section.lines and structured_blocks(section.lines) is None
    ]
    # What a label or tag the text holds once sets apart and asks, else what any label
    # sets apart and asks (a label that earlier turns joined into one prompt repeat): the
    # last in the text.
    repeated = [(n, line.rest) for n, line in enumerate(lines) if line.key is not None]
    for tier in (labelled, repeated):
        asking = sorted((n, t) for n, t in tier if t and asks(t))
        if asking:
            return asking[-1][1]
    bare = [n for n, line in enumerate(lines) if line.shape == "text" and asks(line.raw)]
    if bare and _laid_out([line for n, line in enumerate(lines) if n != bare[-1]]):
        return lines[bare[-1]].raw.strip()
    # Nothing asks: the last labelled or tagged text of one line under a label of a word or
    # two (`Question:`, `问题：`, `<query>`) that starts no paragraph's line (a document's
    # sentence may open like one), where the text holds more than it (a section of several
    # lines, documents).
    one_line = [
        section
        for section in parts
        if section.one_line
        and section.lines
        and len((section.head or "").split()) <= 2
        and _set_apart(lines, section.start)
    ]
    if not one_line:
        return None
    last = one_line[-1]
    more = any(
        section is not last and sum(bool(line.shape) for line in section.lines) > 1
        for section in parts
    )
    if more or _laid_out([line for n, line in enumerate(lines) if n != last.start]):
        return _text(last.lines) or None
    return None


def _last_paragraph(lines: list[Line]) -> str:
    """A section's text after its last blank line (documents may come before what it
    asks)."""
    end = len(lines)
    while end and not lines[end - 1].shape:
        end -= 1
    start = end
    while start and lines[start - 1].shape:
        start -= 1
    return _text(lines[start:end])


def _set_apart(lines: list[Line], at: int) -> bool:
    """Whether line `at` stands apart: a tag, or a line after a blank one or a heading (a
    line after text, or after a separator, continues or opens a document)."""
    if lines[at].shape.startswith("<") or at == 0:
        return True
    before = lines[at - 1]
    return not before.shape or (before.key is not None and not before.rest)


def _laid_out(lines: list[Line]) -> bool:
    """Whether lines hold documents by structure: a repeated mark, or a JSON value a line."""
    if any(line.shape == "text" and _json_line(line.raw) for line in lines):
        return True
    return structured_blocks(lines) is not None


def _json_line(raw: str) -> bool:
    s = raw.strip()
    return s == "null" or (bool(s) and s[0] in '"[{' and loads(s) is not None)


def _text(lines: list[Line]) -> str:
    return "\n".join(line.raw for line in lines).strip()
