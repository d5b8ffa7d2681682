"""Knob rules: relations between knobs that every configuration must keep, read from the knob file's `rules:`.

A rule is data: `{name, expression, why, source}` and optionally `when_set: [knobs]`. The expression says what
must hold, over knob names, numbers, 'quoted' strings, true/false, + - * / //, min(), max(), comparisons
(chains too), `in [...]`, `not in [...]`, `and`, `or`, `not` and `A if C else B`; e.g.
`memtable_heap_space <= heap_size / 2`. `when_set` names knobs the rule binds only when they are set (by the
user, the scenario or the search): left unset, the datastore derives them (Cassandra sizes the memtable space
from the heap), and the rule holds by construction.

Expressions are parsed with Python's `ast` and walked by the small evaluator below, which knows only the nodes
listed above: file content is never executed. The same evaluator computes the best-practice values
(knobs.best_practice), whose names are the machine's facts instead of knobs. An expression evaluates on one
configuration (Python values) or on a whole population at once (numpy columns, for the surrogate searches).
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .knob import KnobError

_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b}
SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.In: "in", ast.NotIn: "not in"}
_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_CONSTANTS = {"true": True, "false": False}
_FUNCTIONS = ("min", "max")
RULE_FIELDS = frozenset({"name", "expression", "why", "source", "when_set"})


class Expression:
    """A checked expression over `names`; `what` names it in messages ("rule memtable_within_half_heap")."""

    def __init__(self, text: str, names: Iterable[str], what: str) -> None:
        self.text = " ".join(str(text).split())
        self.what = what
        try:
            self.tree = ast.parse(self.text, mode="eval").body
        except SyntaxError:
            raise KnobError(f"{what} {self.text!r} is not an expression") from None
        known = set(names)
        self.names: tuple[str, ...] = tuple(dict.fromkeys(self._check(self.tree, known)))

    def _check(self, node: ast.AST, known: set[str]) -> Iterable[str]:
        """The names the expression uses; KnobError for any node outside the grammar."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, float, str)):
                return
        elif isinstance(node, ast.Name):
            if node.id in known:
                yield node.id
                return
            if node.id in _CONSTANTS:
                return
            raise KnobError(f"{self.what} {self.text!r} uses {node.id!r}, which is not one of: "
                            f"{', '.join(sorted(known))}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            yield from self._check(node.operand, known)
            return
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                yield from self._check(value, known)
            return
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            yield from self._check(node.left, known)
            yield from self._check(node.right, known)
            return
        elif isinstance(node, ast.Compare) and all(type(op) in SYMBOLS for op in node.ops):
            yield from self._check(node.left, known)
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)):
                    if not isinstance(right, (ast.List, ast.Tuple)) or not right.elts:
                        raise KnobError(f"{self.what} {self.text!r}: 'in' needs a list like ['a', 'b']")
                    for item in right.elts:
                        yield from self._check(item, known)
                else:
                    yield from self._check(right, known)
            return
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
                and node.args and not node.keywords:
            for arg in node.args:
                yield from self._check(arg, known)
            return
        elif isinstance(node, ast.IfExp):
            for part in (node.test, node.body, node.orelse):
                yield from self._check(part, known)
            return
        raise KnobError(f"{self.what} {self.text!r}: {ast.unparse(node)!r} is not allowed (knob names, numbers, "
                        "'strings', true/false, + - * / //, min, max, comparisons, in [...], and, or, not, if-else)")

    def value(self, values: Mapping[str, Any]) -> Any:
        """The expression's value on one configuration (every name it uses must be in `values`)."""
        return _evaluate(self.tree, values, self)

    def values(self, columns: Mapping[str, Any]) -> Any:
        """The expression's values on a population: `columns` maps each name to a numpy array (or one value)."""
        return _evaluate(self.tree, columns, self, vector=True)


def _evaluate(node: ast.AST, values: Mapping[str, Any], expr: Expression, vector: bool = False) -> Any:
    def value(n: ast.AST) -> Any:
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id in values:
                return values[n.id]
            if n.id in _CONSTANTS:
                return _CONSTANTS[n.id]
            raise KnobError(f"{expr.what} {expr.text!r} needs {n.id}, which the configuration lacks")
        if isinstance(n, ast.UnaryOp):
            operand = value(n.operand)
            if isinstance(n.op, ast.USub):
                return -operand
            return _not(operand, vector)
        if isinstance(n, ast.BoolOp):
            parts = [value(v) for v in n.values]
            out = parts[0]
            for part in parts[1:]:
                out = _and(out, part, vector) if isinstance(n.op, ast.And) else _or(out, part, vector)
            return out
        if isinstance(n, ast.BinOp):
            try:
                return _BINARY[type(n.op)](value(n.left), value(n.right))
            except ZeroDivisionError:
                raise KnobError(f"{expr.what} {expr.text!r} divides by zero") from None
        if isinstance(n, ast.Compare):
            out, left = True, value(n.left)
            for op, right_node in zip(n.ops, n.comparators):
                if isinstance(op, (ast.In, ast.NotIn)):
                    hit: Any = False
                    for item in right_node.elts:
                        hit = _or(hit, equal(left, value(item)), vector)
                    ok = hit if isinstance(op, ast.In) else _not(hit, vector)
                    right = None
                else:
                    right = value(right_node)
                    ok = compare(left, SYMBOLS[type(op)], right)
                out = _and(out, ok, vector)
                left = right
            return out
        if isinstance(n, ast.Call):
            args = [value(a) for a in n.args]
            if vector:
                import numpy as np

                pick = np.minimum if n.func.id == "min" else np.maximum
                out = args[0]
                for arg in args[1:]:
                    out = pick(out, arg)
                return out
            return (min if n.func.id == "min" else max)(*args)
        if isinstance(n, ast.IfExp):
            if vector:
                import numpy as np

                return np.where(value(n.test), value(n.body), value(n.orelse))
            return value(n.body) if value(n.test) else value(n.orelse)
        raise KnobError(f"{expr.what} {expr.text!r}: cannot evaluate {ast.unparse(n)!r}")

    try:
        return value(node)
    except TypeError as exc:   # e.g. a number compared with a string: the rule, not the configuration, is wrong
        raise KnobError(f"{expr.what} {expr.text!r} cannot be evaluated: {exc}") from None


def compare(left: Any, op: str, right: Any) -> Any:
    """`left op right` for one of the comparison symbols of SYMBOLS other than in / not in."""
    if op == "==":
        return equal(left, right)
    if op == "!=":
        return _not(equal(left, right), hasattr(left, "shape") or hasattr(right, "shape"))
    return _ORDER[op](left, right)


def equal(a: Any, b: Any) -> Any:
    """==, with a bool never equal to a number (true is not 1). Strings compare exactly: configurations hold
    the enum choices as the knob file spells them, and rules are checked to spell them so."""
    if isinstance(a, bool) != isinstance(b, bool) and not hasattr(a, "shape") and not hasattr(b, "shape"):
        return False
    return a == b


def _and(a: Any, b: Any, vector: bool) -> Any:
    if vector:
        import numpy as np

        return np.logical_and(a, b)
    return bool(a) and bool(b)


def _or(a: Any, b: Any, vector: bool) -> Any:
    if vector:
        import numpy as np

        return np.logical_or(a, b)
    return bool(a) or bool(b)


def _not(a: Any, vector: bool) -> Any:
    if vector:
        import numpy as np

        return np.logical_not(a)
    return not a


# ------------------------------------------------------------------------------------------------ rules

@dataclass(frozen=True)
class Rule:
    """One relation between knobs that a configuration must keep."""

    name: str
    expression: Expression = field(compare=False)
    why: str
    source: str
    when_set: tuple[str, ...] = ()     # the rule binds only when these knobs are set (else the datastore derives them)

    @property
    def text(self) -> str:
        return self.expression.text

    @property
    def knobs(self) -> tuple[str, ...]:
        return self.expression.names

    def binds(self, set_knobs: Iterable[str]) -> bool:
        """Whether the rule applies when `set_knobs` are the knobs given values (the others at their defaults)."""
        given = set(set_knobs)
        return all(name in given for name in self.when_set)

    def holds(self, config: Mapping[str, Any]) -> bool:
        """Whether a full configuration (defaults filled in) keeps the rule."""
        return bool(self.expression.value(config))

    def broken_by(self, config: Mapping[str, Any]) -> str:
        """One line for the user: which rule, on which values, and why it exists."""
        values = ", ".join(f"{name}={_shown(config[name])}" for name in self.knobs)
        return f"knob rule {self.name} ({self.text}) is broken by {values}: {self.why}"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def build_rules(raw: Any, knobs: Mapping[str, Any], origin: str) -> tuple[Rule, ...]:
    """The `rules:` list of a knob file, checked: fields, names, expressions over known knobs, string values that
    are choices of the enum knob they are compared with, and the defaults keep every rule."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise KnobError(f"{origin}: rules must be a list of {{name, expression, why, source}}")
    rules: list[Rule] = []
    for spec in raw:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise KnobError(f"{origin}: every rule is a mapping with name, expression, why and source")
        name = spec["name"]
        where = f"{origin}: rule {name}"
        unknown = sorted(set(map(str, spec)) - RULE_FIELDS)
        if unknown:
            raise KnobError(f"{where}: unknown field {', '.join(unknown)}")
        for req in ("expression", "why", "source"):
            if not isinstance(spec.get(req), str) or not spec[req].strip():
                raise KnobError(f"{where}: field {req} is missing (a non-empty string)")
        if any(r.name == name for r in rules):
            raise KnobError(f"{where}: a second rule of that name")
        expression = Expression(spec["expression"], knobs, f"{origin}: rule {name}:")
        when_set = spec.get("when_set") or []
        if not isinstance(when_set, list) or not all(k in expression.names for k in when_set):
            raise KnobError(f"{where}: field when_set must list knobs the expression uses")
        _check_literals(expression.tree, knobs, where)
        rule = Rule(name=name, expression=expression, why=" ".join(spec["why"].split()),
                    source=" ".join(spec["source"].split()), when_set=tuple(when_set))
        defaults = {k: knobs[k].default for k in rule.knobs}
        if not rule.holds(defaults):
            raise KnobError(f"{where}: the defaults break it ({rule.broken_by(defaults)})")
        rules.append(rule)
    return tuple(rules)


def _check_literals(node: ast.AST, knobs: Mapping[str, Any], where: str) -> None:
    """A string compared with an enum knob is one of its choices (a typo would make the rule never bind)."""
    for compare in (n for n in ast.walk(node) if isinstance(n, ast.Compare)):
        operands = [compare.left, *compare.comparators]
        named = [knobs[o.id] for o in operands if isinstance(o, ast.Name) and o.id in knobs]
        literals = [o.value for o in operands if isinstance(o, ast.Constant)]
        literals += [e.value for o in compare.comparators if isinstance(o, (ast.List, ast.Tuple))
                     for e in o.elts if isinstance(e, ast.Constant)]
        for knob in named:
            for literal in literals:
                if isinstance(literal, str) and knob.type != "enum":
                    raise KnobError(f"{where}: compares {knob.name} ({knob.type}) with the string {literal!r}")
                if knob.type == "enum" and not any(c == literal for c in knob.choices):
                    raise KnobError(f"{where}: {literal!r} is not a choice of {knob.name} "
                                    f"({', '.join(map(str, knob.choices))})")


def check(rules: Iterable[Rule], config: Mapping[str, Any], set_knobs: Iterable[str]) -> None:
    """KnobError (one line) for the first rule that binds and that the full configuration `config` breaks."""
    set_knobs = set(set_knobs)
    for rule in rules:
        if rule.binds(set_knobs) and not rule.holds(config):
            raise KnobError(rule.broken_by(config))
