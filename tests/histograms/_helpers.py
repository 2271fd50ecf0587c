"""Shared helpers for the histogram tests."""

from collections.abc import Iterator, Sequence


def neighbours(x: Sequence[int], replace: bool) -> Iterator[list[int]]:
    """Histograms adjacent to x: add one record (add/remove), or move one record between bins (replace-one)."""
    for j in range(len(x)):
        y = list(x)
        y[j] += 1
        if not replace:
            yield y
        else:
            for i in range(len(x)):
                if i != j and x[i] > 0:
                    z = list(y)
                    z[i] -= 1
                    yield z
