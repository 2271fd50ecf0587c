"""PyTorch adapter of dpkit's DP-SGD engine (:class:`dpkit.learn.DPSGDTrainer`); imported only by ``fit``.

Per-sample gradients come from :mod:`torch.func` (``functional_call`` + ``vmap`` + ``grad``): no hand-written
autograd. Clipping and per-example rounding follow :func:`dpkit.learn.dpsgd.clipped_units` in float64 on the
module's device (the rounded units are integers below ``2^53``, so their sum is exact in any order); the exact
sum is copied to numpy, where dpkit's lattice Gaussian adds the noise from dpkit's source; the noisy gradient is
copied back into ``.grad`` and the caller's optimizer steps (post-processing).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from dpkit.core.errors import InvalidData, MissingDependency, WrongType


def _torch() -> Any:
    try:  # imported by name: torch is an optional dependency (no stubs needed for type checking)
        torch = importlib.import_module("torch")
        importlib.import_module("torch.func")
    except ImportError as exc:
        raise MissingDependency("DPSGDTrainer needs PyTorch: pip install 'dpkit[torch]'") from exc
    return torch


class _TorchAdapter:
    def __init__(self, torch: Any, module: Any, optimizer: Any, loss_fn: Any, X: Any, Y: Any, device: str) -> None:
        func = importlib.import_module("torch.func")
        functional_call, grad, vmap = func.functional_call, func.grad, func.vmap

        self.torch, self.module, self.optimizer, self.device = torch, module, optimizer, device
        self.X, self.Y = X, Y
        self.names = [k for k, p in module.named_parameters() if p.requires_grad]
        self.params = dict(module.named_parameters())
        self.n_params = int(sum(self.params[k].numel() for k in self.names))

        def loss_one(p: dict[str, Any], b: dict[str, Any], x: Any, y: Any) -> Any:
            out = functional_call(module, (p, b), (x.unsqueeze(0),))
            return loss_fn(out, y.unsqueeze(0))

        self._grads = vmap(grad(loss_one), in_dims=(None, None, 0, 0))

    def units_sum(self, idx: np.ndarray, clip: float, grid: float) -> np.ndarray:
        torch = self.torch
        if idx.size == 0:
            return np.zeros(self.n_params)
        total = torch.zeros(self.n_params, dtype=torch.float64, device=self.device)
        p = {k: v.detach() for k, v in self.module.named_parameters() if k in self.names}
        b = {k: v.detach() for k, v in self.module.named_buffers()}
        for start in range(0, idx.size, 1024):
            sel = torch.as_tensor(idx[start:start + 1024], device=self.device)
            g = self._grads(p, b, self.X[sel], self.Y[sel])
            G = torch.cat([g[k].reshape(sel.shape[0], -1).to(torch.float64) for k in self.names], dim=1)
            norms = torch.linalg.vector_norm(G, dim=1)
            factor = torch.where(norms > clip, clip / torch.where(norms > 0, norms, torch.ones_like(norms)),
                                 torch.ones_like(norms))
            total += torch.round(G * (factor / grid)[:, None]).sum(dim=0)  # round half to even, as numpy
        return total.cpu().numpy()

    def apply(self, grad: np.ndarray) -> None:
        torch = self.torch
        flat = torch.as_tensor(grad, dtype=torch.float64, device=self.device)
        at = 0
        for k in self.names:
            prm = self.params[k]
            m = prm.numel()
            prm.grad = flat[at:at + m].reshape(prm.shape).to(prm.dtype)
            at += m
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def state(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.module.state_dict().items()}


def n_params(module: Any) -> int:
    """The number of trainable parameters of ``module`` (:class:`WrongType` if it is not a torch module)."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise WrongType("module", "a torch.nn.Module")
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def adapter(module: Any, optimizer: Any, loss_fn: Any, X: Any, y: Any, device: str | None) -> tuple[_TorchAdapter, int]:
    """The engine adapter for ``module`` (moved to ``device``) and the private rows ``X``, ``y`` (moved too)."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise WrongType("module", "a torch.nn.Module")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise WrongType("optimizer", "a torch.optim.Optimizer over the module's parameters")
    if not callable(loss_fn):
        raise WrongType("loss_fn", "a callable loss_fn(output, target)")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise WrongType("device", "'cpu', 'cuda' or None")
    dtype = next(module.parameters()).dtype
    try:
        Xt = torch.as_tensor(np.asarray(X, dtype=np.float64) if not torch.is_tensor(X) else X).to(device, dtype)
        Yt = torch.as_tensor(np.asarray(y) if not torch.is_tensor(y) else y).to(device)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidData("X", "must be numeric arrays or tensors") from None
    if Xt.ndim < 1 or Xt.shape[0] == 0 or Yt.shape[:1] != Xt.shape[:1]:
        raise InvalidData("y", "must have one target per row of X (and X at least one row)")
    if Xt.is_floating_point() and not bool(torch.isfinite(Xt).all()):
        raise InvalidData("X", "must be finite")
    from dpkit.learn.dpsgd import MAX_ROWS

    if Xt.shape[0] > MAX_ROWS:
        raise InvalidData("X", "has too many rows")
    module.to(device)
    return _TorchAdapter(torch, module, optimizer, loss_fn, Xt, Yt, str(device)), int(Xt.shape[0])
