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

Size limits (checked before and right after parsing, so that neither Python's parser nor the recursive
checker, ibis or the SQL compiler can hit ``RecursionError``): at most ``_MAX_LEN`` characters, at most
``_MAX_OPERATORS`` operator tokens and ``_MAX_NESTING`` levels of brackets (counted on the token stream,
before :func:`ast.parse`), and a tree at most ``_MAX_DEPTH`` deep (measured without recursion). A query
also caps the depth of derived columns built on derived columns (:meth:`Expr.depth`, summed along the
chain) at ``_MAX_DEPTH``. All are :class:`~dpkit.core.errors.InvalidParameter` naming the parameter.
"""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from typing import Any

from dpkit.core.errors import InvalidParameter, WrongType

__all__ = ["Expr", "chained_depth", "parse", "tree_depth"]

_MAX_LEN = 10_000
_MAX_OPERATORS = 500
_MAX_NESTING = 50
_MAX_DEPTH = 100
_BRACKETS_OPEN = {"(", "[", "{"}
_BRACKETS_CLOSE = {")", "]", "}"}
_NOT_OPERATORS = {",", ":", *_BRACKETS_OPEN, *_BRACKETS_CLOSE}
_CMP = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


class Expr:
    """A checked expression: its source text, its tree and the columns it reads."""

    def __init__(self, text: str, tree: ast.expr, names: frozenset[str], depth: int = 1) -> None:
        self.text = text
        self.tree = tree
        self.names = names
        self.depth = depth  # the tree's depth (<= _MAX_DEPTH)

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


def _precheck(text: str, param: str) -> None:
    """Operator count and bracket nesting on the token stream (iterative: safe for any input)."""
    ops = depth = 0
    problem = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP:
                if tok.string in _BRACKETS_OPEN:
                    depth += 1
                elif tok.string in _BRACKETS_CLOSE:
                    depth -= 1
                elif tok.string not in _NOT_OPERATORS:
                    ops += 1
            elif tok.type == tokenize.NAME and keyword.iskeyword(tok.string) and tok.string not in (
                    "True", "False", "None"):
                ops += 1
            if depth > _MAX_NESTING:
                problem = f"expression nested too deeply (more than {_MAX_NESTING} levels of brackets)"
                break
            if ops > _MAX_OPERATORS:
                problem = f"expression too complex (more than {_MAX_OPERATORS} operators)"
                break
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        problem = "not a valid expression"
    if problem is not None:
        raise InvalidParameter(param, problem)


def tree_depth(node: ast.AST) -> int:
    """The depth of an AST, without recursion."""
    best = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        if d > _MAX_DEPTH:  # deep enough to refuse: stop walking
            return d
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return best


def parse(text: Any, columns: Any, param: str = "expression") -> Expr:
    """Parse and check ``text`` against the public column names ``columns``."""
    if not isinstance(text, str):
        raise WrongType(param, "an expression string")
    if len(text) > _MAX_LEN:
        raise InvalidParameter(param, "expression too long")
    if not text.strip():
        raise InvalidParameter(param, "must not be empty")
    if "\x00" in text:
        raise InvalidParameter(param, "not a valid expression")
    _precheck(text.strip(), param)
    tree = None
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        pass
    except (RecursionError, MemoryError):  # pragma: no cover - excluded by the token limits above
        raise InvalidParameter(param, "expression too complex") from None
    if tree is None:
        raise InvalidParameter(param, "not a valid expression")
    depth = tree_depth(tree.body)
    if depth > _MAX_DEPTH:
        raise InvalidParameter(param, f"expression nested too deeply (more than {_MAX_DEPTH} levels)")
    names: set[str] = set()
    _check(tree.body, columns, param, names)
    return Expr(text, tree.body, frozenset(names), depth)


def chained_depth(expr: Expr, derives: Any, param: str) -> int:
    """The depth of ``expr`` once the derived columns it reads are substituted (``derives``: the query's
    ``(name, Expr)`` pairs so far); :class:`InvalidParameter` beyond ``_MAX_DEPTH``."""
    known: dict[str, int] = {}
    for name, e in derives:
        known[name] = e.depth + max((known.get(n, 0) for n in e.names), default=0)
    d = expr.depth + max((known.get(n, 0) for n in expr.names), default=0)
    if d > _MAX_DEPTH:
        raise InvalidParameter(param, f"derived columns nested too deeply (more than {_MAX_DEPTH} levels in all)")
    return d


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
        for cmp, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(cmp, (ast.In, ast.NotIn)):
                assert isinstance(right, (ast.List, ast.Tuple, ast.Set))  # the validator checked it
                values = [_literal(e, "expression") for e in right.elts]
                parts.append(left.isin(values) if isinstance(cmp, ast.In) else left.notin(values))
                continue
            r = _compile(right, t)
            if isinstance(cmp, ast.Eq):
                parts.append(left == r)
            elif isinstance(cmp, ast.NotEq):
                parts.append(left != r)
            elif isinstance(cmp, ast.Lt):
                parts.append(left < r)
            elif isinstance(cmp, ast.LtE):
                parts.append(left <= r)
            elif isinstance(cmp, ast.Gt):
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
