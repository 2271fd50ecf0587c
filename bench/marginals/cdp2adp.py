"""``cdp_rho``: the largest rho such that rho-zCDP implies (eps, delta)-DP (Canonne, Kamath, Steinke 2020), as
private-pgm's ``mechanisms/cdp2adp.py`` computes it (Apache License 2.0, (c) 2020 IBM / Thomas Steinke). Kept
apart from ``pgm_mechanisms.py`` so the reference points do not import mbi (and JAX) inside their timing."""

import math


def cdp_delta(rho, eps):
    assert rho >= 0
    assert eps >= 0
    if rho == 0:
        return 0
    amin = 1.01
    amax = (eps + 1) / (2 * rho) + 2
    for _ in range(1000):
        alpha = (amin + amax) / 2
        derivative = (2 * alpha - 1) * rho - eps + math.log1p(-1.0 / alpha)
        if derivative < 0:
            amin = alpha
        else:
            amax = alpha
    delta = math.exp((alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha)) / (alpha - 1.0)
    return min(delta, 1.0)


def cdp_rho(eps, delta):
    """The largest rho such that rho-zCDP implies (eps, delta)-DP (private-pgm's conversion)."""
    assert eps >= 0
    assert delta > 0
    if delta >= 1:
        return 0.0
    rhomin = 0.0
    rhomax = eps + 1
    for _ in range(1000):
        rho = (rhomin + rhomax) / 2
        if cdp_delta(rho, eps) <= delta:
            rhomin = rho
        else:
            rhomax = rho
    return rhomin
