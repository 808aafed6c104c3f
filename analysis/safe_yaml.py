"""YAML read from a config someone else wrote, within bounds (pure).

`yaml.safe_load` builds no Python objects, but it still lets a short file cost without
limit: an alias ("billion laughs") bomb expands to billions of nodes once anything walks
it, deep nesting overflows the recursive composer, and a key given twice is silently
replaced by its last value. `read_yaml` reads a mapping from text and refuses, with
one line naming the line and what is allowed:

- text above MAX_TEXT_BYTES;
- nesting deeper than MAX_DEPTH (counted on the event stream, before composing, so no
  recursion happens);
- explicit tags (`!!python/...`, `!!binary`, `!!set`, `!foo`): a config holds plain
  scalars, lists and mappings;
- a document whose nodes, with every alias expanded, number more than MAX_NODES
  (counted on the composed graph with one memo entry per node, never expanded);
- a key given twice in one mapping, and keys that are not plain scalars;
- integers longer than MAX_INT_DIGITS digits.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_TEXT_BYTES = 200_000  # the largest shipped config has 3 kB
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_INT_DIGITS = 30
SHOWN_CHARS = 60


class YamlRefused(ValueError):
    """The text is not a config pathdiv reads; the message is one line."""


def shorten(value: Any, limit: int = SHOWN_CHARS) -> str:
    """repr(value) cut to `limit` characters, for error messages (never a whole blob)."""
    try:
        text = repr(value) if not isinstance(value, (dict, list)) else _short_container(value)
    except Exception:  # a hostile object's repr: say its type only
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short_container(value: dict[Any, Any] | list[Any]) -> str:
    """repr of a container without walking more than a few items (aliases may repeat)."""
    def one(v: Any) -> str:
        if isinstance(v, dict):
            return "{...}" if v else "{}"
        if isinstance(v, list):
            return "[...]" if v else "[]"
        return repr(v)[:20]

    if isinstance(value, dict):
        items = [f"{one(k)}: {one(v)}" for k, v in list(value.items())[:4]]
        return "{" + ", ".join(items) + (", ...}" if len(value) > 4 else "}")
    items = [one(v) for v in value[:4]]
    return "[" + ", ".join(items) + (", ...]" if len(value) > 4 else "]")


def _where(node_or_event: Any) -> str:
    mark = getattr(node_or_event, "start_mark", None)
    return f"line {mark.line + 1}" if mark is not None else "somewhere"


def _scan_events(text: str) -> None:
    """Depth and tags, on the flat event stream (no recursion, no expansion)."""
    depth = 0
    for event in yaml.parse(text, Loader=_BaseLoader):
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!":
            raise YamlRefused(f"{_where(event)}: the tag {shorten(tag)} is not allowed; a "
                              "config holds plain values, lists and mappings (quote a "
                              "value that starts with '!')")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlRefused(f"{_where(event)}: nested more than {MAX_DEPTH} levels "
                                  "deep; a config needs a few")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _count_nodes(root: Node) -> None:
    """Nodes of the document with every alias expanded, computed without expanding:
    size(node) = 1 + sum(size(child)), memoised per node (aliases share nodes)."""
    size: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose children are being counted
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        if not children_done and id(node) in open_:
            raise YamlRefused(f"{_where(node)}: an alias refers to a node that contains "
                              "it; a config cannot be recursive")
        if isinstance(node, ScalarNode):
            size[id(node)] = 1
            continue
        kids: list[Node] = (list(node.value) if isinstance(node, SequenceNode)
                            else [n for pair in node.value for n in pair])
        if children_done:
            open_.discard(id(node))
            size[id(node)] = 1 + sum(size[id(k)] for k in kids)
            if size[id(node)] > MAX_NODES:
                raise YamlRefused(f"{_where(node)}: with its aliases (*name) expanded the "
                                  f"config has more than {MAX_NODES} values; a config "
                                  "has a few hundred (an alias bomb?)")
            continue
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)


# libyaml's parser when PyYAML has it (10x faster on a large hostile file), else Python's
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that refuses duplicate and non-scalar keys and very long integers."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                raise YamlRefused(f"{_where(key_node)}: a key must be a plain name, not a "
                                  "list or mapping")
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise YamlRefused(f"{_where(key_node)}: the key {shorten(key)} is given "
                                  "twice in the same mapping; each key once (YAML would "
                                  "silently keep the last)")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise YamlRefused(f"{_where(node)}: an integer of {digits} digits; at most "
                              f"{MAX_INT_DIGITS}")
        return super().construct_yaml_int(node)  # type: ignore[no-any-return]


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _unshared(value: Any) -> Any:
    """`value` with every mapping and list copied where it occurs: the loader hands an
    alias the object it names, and an edit of one place would change every place that
    named it. Bounded by MAX_NODES (counted before)."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def load_text(text: str) -> Any:
    """The value of one YAML document, within the bounds above; YamlRefused if not."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise YamlRefused(f"{len(text)} characters; a config is at most "
                          f"{MAX_TEXT_BYTES // 1000} kB")
    try:
        _scan_events(text)
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None
            _count_nodes(root)
            return _unshared(loader.construct_document(root))
        finally:
            loader.dispose()
    except YamlRefused:
        raise
    except yaml.YAMLError as exc:
        raise YamlRefused(f"not valid YAML: {_yaml_problem(exc)}") from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise YamlRefused(f"not a config pathdiv can read ({type(exc).__name__})") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's problem and line, without echoing the text around it."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        return shorten_text(f"{where}{exc.problem or exc.context or 'unreadable'}")
    return shorten_text(str(exc).splitlines()[0] if str(exc) else "unreadable")


def shorten_text(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."
