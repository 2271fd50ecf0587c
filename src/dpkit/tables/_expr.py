"""The safe expression language of ``Query.filter`` and ``Query.derive``.

An expression is parsed with :mod:`ast` (``mode="eval"``; nothing is ever evaluated by Python) and every
node is checked against a whitelist:

- names of existing columns (``True``/``False`` are literals);
- numeric, string and boolean literals;
- comparisons ``== != < <= > >=`` (chained comparisons are and-ed), ``in [...]`` / ``not in [...]`` with a
  list or tuple of literals;
- ``and``, ``or``, ``not``;
- arithmetic ``+ - * / // % **`` and unary ``-`` / ``+``;
- ``a if cond else b``.

Anything else -- attribute access, calls, subscripts, comprehensions, lambdas, f-strings, names that are
not columns (dunder names included) -- is :class:`~dpkit.core.errors.InvalidParameter` naming the
parameter (and, for an unknown column, the column: column names are public schema, not data). The checked
tree is compiled to an ibis expression over the query's table, so the same expression runs on every
ibis backend.
"""

from __future__ import annotations

import ast
from typing import Any

from dpkit.core.errors import InvalidParameter, WrongType

__all__ = ["Expr", "parse"]

_MAX_LEN = 10_000
_CMP = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


class Expr:
    """A checked expression: its source text, its tree and the columns it reads."""

    def __init__(self, text: str, tree: ast.expr, names: frozenset[str]) -> None:
        self.text = text
        self.tree = tree
        self.names = names

    def compile(self, table: Any) -> Any:
        """The ibis expression over ``table`` (no data is touched)."""
        return _compile(self.tree, table)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def _literal(node: ast.AST, param: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)) \
            and not isinstance(node.operand.value, bool):
        v = node.operand.value
        return -v if isinstance(node.op, ast.USub) else v
    raise InvalidParameter(param, "'in' needs a list of literals")


def _check(node: ast.AST, columns: Any, param: str, names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, (int, float, str, bool)):
            raise InvalidParameter(param, "only numeric, string and boolean literals are allowed")
        return
    if isinstance(node, ast.Name):
        if node.id not in columns:
            raise InvalidParameter(param, f"unknown column {node.id!r}")
        names.add(node.id)
        return
    if isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, columns, param, names)
        return
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
            raise InvalidParameter(param, "operator not allowed")
        _check(node.operand, columns, param, names)
        return
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, _ARITH):
            raise InvalidParameter(param, "operator not allowed")
        _check(node.left, columns, param, names)
        _check(node.right, columns, param, names)
        return
    if isinstance(node, ast.Compare):
        _check(node.left, columns, param, names)
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                if not isinstance(right, (ast.List, ast.Tuple, ast.Set)) or not right.elts:
                    raise InvalidParameter(param, "'in' needs a non-empty list of literals")
                for e in right.elts:
                    _literal(e, param)
            elif isinstance(op, _CMP):
                _check(right, columns, param, names)
            else:
                raise InvalidParameter(param, "operator not allowed ('is' is not supported)")
        return
    if isinstance(node, ast.IfExp):
        for v in (node.test, node.body, node.orelse):
            _check(v, columns, param, names)
        return
    if isinstance(node, ast.Attribute):
        raise InvalidParameter(param, "attribute access is not allowed")
    if isinstance(node, ast.Call):
        raise InvalidParameter(param, "function calls are not allowed")
    raise InvalidParameter(param, f"{type(node).__name__} expressions are not allowed")


def parse(text: Any, columns: Any, param: str = "expression") -> Expr:
    """Parse and check ``text`` against the public column names ``columns``."""
    if not isinstance(text, str):
        raise WrongType(param, "an expression string")
    if not text.strip():
        raise InvalidParameter(param, "must not be empty")
    if len(text) > _MAX_LEN:
        raise InvalidParameter(param, "expression too long")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise InvalidParameter(param, "not a valid expression") from None
    names: set[str] = set()
    _check(tree.body, columns, param, names)
    return Expr(text, tree.body, frozenset(names))


def _lit(value: Any) -> Any:
    import ibis

    return ibis.literal(value)


def _compile(node: ast.AST, t: Any) -> Any:
    if isinstance(node, ast.Constant):
        return _lit(node.value)
    if isinstance(node, ast.Name):
        return t[node.id]
    if isinstance(node, ast.BoolOp):
        vals = [_compile(v, t) for v in node.values]
        out = vals[0]
        for v in vals[1:]:
            out = (out & v) if isinstance(node.op, ast.And) else (out | v)
        return out
    if isinstance(node, ast.UnaryOp):
        v = _compile(node.operand, t)
        if isinstance(node.op, ast.Not):
            return ~v
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _compile(node.left, t), _compile(node.right, t)
        op = node.op
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return a // b
        if isinstance(op, ast.Mod):
            return a % b
        return a**b
    if isinstance(node, ast.Compare):
        parts = []
        left = _compile(node.left, t)
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                values = [_literal(e, "expression") for e in right.elts]
                parts.append(left.isin(values) if isinstance(op, ast.In) else left.notin(values))
                continue
            r = _compile(right, t)
            if isinstance(op, ast.Eq):
                parts.append(left == r)
            elif isinstance(op, ast.NotEq):
                parts.append(left != r)
            elif isinstance(op, ast.Lt):
                parts.append(left < r)
            elif isinstance(op, ast.LtE):
                parts.append(left <= r)
            elif isinstance(op, ast.Gt):
                parts.append(left > r)
            else:
                parts.append(left >= r)
            left = r
        out = parts[0]
        for p in parts[1:]:
            out = out & p
        return out
    if isinstance(node, ast.IfExp):
        import ibis

        return ibis.ifelse(_compile(node.test, t), _compile(node.body, t), _compile(node.orelse, t))
    raise InvalidParameter("expression", "not allowed")  # pragma: no cover - excluded by _check
