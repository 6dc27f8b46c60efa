"""Distance-based membership inference against a synthetic data release, and its kNN engine.

Threat model: the attacker sees ONLY the released synthetic table (no generator, no parameters,
no query access) plus candidate records whose membership in the generator's training set is in
question. A generator that memorises puts synthetic rows very close to its training rows, so a
candidate's distance to the nearest synthetic row is smaller for members than for non-members
(Chen, Yu, Zhang, Fritz 2020, "GAN-Leaks: A Taxonomy of Membership Inference Attacks against
Generative Models", arXiv 1909.03935, the "full black-box" attack; Yale et al. 2019, DCR).

Distances are Euclidean on the `targets.tabular_encoding.MixedTypeEncoder` encoding, i.e. the
root-mean-square Gower distance documented there. The exact k-nearest-neighbour search below is
shared with the DCR/NNDR checks in `audit.synthetic_metrics`; it lives here because attacks/ must
not import audit/.

How the search stays fast and memory-bounded without approximation
-------------------------------------------------------------------
1. Squared distances for a (row chunk × reference tile) come from ONE matrix product on augmented
   vectors [−2a, |a|², 1]·[b, 1, |b|²] (float32 BLAS), after centring both sides on the reference
   mean to shrink the norms and with them the cancellation error. Tiles are small enough to stay
   in cache; nothing N × M is ever held (memory ~ chunk × n_reference / 16 floats).
2. Each tile is reduced to *block minima*: the reference rows are partitioned into blocks of 16,
   and only each block's smallest (approximate) distance is kept. If blocks are ranked by their
   exact minima, the k nearest neighbours lie in the first k blocks (each of the first k blocks
   holds a distinct row at most as far as the j-th neighbour). Keeping k + 2 blocks absorbs the
   float32 error of step 1.
3. The rows of the kept blocks are re-ranked with exact distances computed from differences
   (no cancellation: an exact copy has distance exactly 0).
The same tile gives, at no extra matrix cost, the nearest neighbours in the other direction
(reference row → nearest query row), which `mutual_nearest_neighbours` returns.
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "DISTANCE_THREAT_MODEL",
    "distance_membership_scores",
    "nearest_neighbours",
    "nearest_distances",
    "mutual_nearest_neighbours",
]

DISTANCE_THREAT_MODEL = (
    "The attacker sees only the released synthetic table and scores each candidate record by "
    "minus its distance to the nearest synthetic row."
)

_BLOCK = 16  # reference rows per block (step 2)
_EXTRA_BLOCKS = 2  # blocks kept beyond k, against float32 error in the block minima
_FAR = np.float32(1e30)  # "infinitely far" for padding rows; finite so that BLAS never sees inf
DEFAULT_CHUNK_SIZE = 512  # query rows per chunk
DEFAULT_TILE_SIZE = 2048  # reference rows per tile


def _as_matrix(name: str, x) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (rows × encoded features), got shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{name}: has no rows")
    try:
        a = np.ascontiguousarray(a, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected numbers, got dtype {a.dtype}") from exc
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return a


def _round_up(n: int, multiple: int) -> int:
    return int(math.ceil(n / multiple) * multiple)


def _augmented(x: np.ndarray, centre: np.ndarray, n_padded: int, query_side: bool) -> torch.Tensor:
    """[−2x, |x|², 1] (query side) or [x, 1, |x|²] (reference side), padded with far-away rows."""
    n, d = x.shape
    out = np.zeros((n_padded, d + 2), dtype=np.float32)
    centred = x - centre
    norms = np.einsum("ij,ij->i", centred, centred, dtype=np.float64).astype(np.float32)
    if query_side:
        out[:n, :d] = -2.0 * centred
        out[:n, d] = norms
        out[n:, d] = _FAR
        out[:, d + 1] = 1.0
    else:
        out[:n, :d] = centred
        out[:, d] = 1.0
        out[:n, d + 1] = norms
        out[n:, d + 1] = _FAR
    return torch.from_numpy(out)


def _exact_rerank(
    queries: np.ndarray,
    query_index: np.ndarray,
    reference: np.ndarray,
    candidates: np.ndarray,
    k: int,
    exclude_self: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k among `candidates` (rows of `reference`, −1 = none) for each query row."""
    valid = candidates >= 0
    safe = np.where(valid, candidates, 0)
    diff = reference[safe] - queries[query_index][:, None, :]
    dist2 = np.einsum("ijk,ijk->ij", diff, diff, dtype=np.float64)
    dist2[~valid] = np.inf
    if exclude_self:
        dist2[safe == query_index[:, None]] = np.inf
    order = np.argsort(dist2, axis=1, kind="stable")[:, :k]
    best2 = np.take_along_axis(dist2, order, axis=1)
    best_index = np.take_along_axis(safe, order, axis=1)
    return np.sqrt(best2), best_index.astype(np.int64)


def _block_members(block_ids: np.ndarray, tile: int, per_tile: int, n_rows: int) -> np.ndarray:
    """Row indices of blocks: block β of tile t = β // per_tile holds rows t·tile + β % per_tile + s·per_tile."""
    t, b = np.divmod(block_ids, per_tile)
    rows = (t * tile + b)[..., None] + per_tile * np.arange(_BLOCK)
    rows = rows.reshape(*block_ids.shape[:-1], -1)
    return np.where(rows < n_rows, rows, -1)


def _search(
    a: np.ndarray,
    b: np.ndarray,
    k_a: int,
    k_b: int,
    *,
    exclude_self: bool,
    chunk_size: int,
    tile_size: int,
):
    """k_a nearest rows of b for each row of a, and k_b nearest rows of a for each row of b."""
    n_a, n_b = a.shape[0], b.shape[0]
    qc = _round_up(max(chunk_size, _BLOCK), _BLOCK)
    rc = _round_up(max(min(tile_size, _round_up(n_b, _BLOCK)), _BLOCK), _BLOCK)
    n_a_pad, n_b_pad = _round_up(n_a, qc), _round_up(n_b, rc)
    row_blocks_per_tile, col_blocks_per_chunk = rc // _BLOCK, qc // _BLOCK
    n_row_blocks = n_b_pad // _BLOCK
    m_a = min(k_a + _EXTRA_BLOCKS, n_row_blocks)
    m_b = min(k_b + _EXTRA_BLOCKS, n_a_pad // _BLOCK)

    centre = b.mean(axis=0, dtype=np.float64).astype(np.float32)
    a_aug = _augmented(a, centre, n_a_pad, query_side=True)
    b_aug = _augmented(b, centre, n_b_pad, query_side=False)

    dist_a = np.empty((n_a, k_a)) if k_a else None
    index_a = np.empty((n_a, k_a), dtype=np.int64) if k_a else None
    tile = torch.empty((qc, rc), dtype=torch.float32)
    row_block_min = torch.empty((qc, n_row_blocks), dtype=torch.float32) if k_a else None
    col_block_min = torch.empty((n_b_pad, col_blocks_per_chunk), dtype=torch.float32) if k_b else None
    best_col_val = torch.full((n_b_pad, m_b), float(_FAR)) if k_b else None
    best_col_blk = torch.zeros((n_b_pad, m_b), dtype=torch.int64) if k_b else None

    for c in range(n_a_pad // qc):
        q0 = c * qc
        a_chunk = a_aug[q0:q0 + qc]
        for t in range(n_b_pad // rc):
            r0 = t * rc
            torch.mm(a_chunk, b_aug[r0:r0 + rc].T, out=tile)
            if exclude_self:
                lo, hi = max(q0, r0), min(q0 + qc, r0 + rc, n_a)
                if lo < hi:
                    diag = torch.arange(lo, hi)
                    tile[diag - q0, diag - r0] = float(_FAR)
            if k_a:
                # Strided blocks (row r0 + s·W + β for s < 16) make this a middle-axis reduction,
                # which vectorises; contiguous blocks of 16 would be an innermost one (≈10× slower).
                torch.amin(tile.view(qc, _BLOCK, row_blocks_per_tile), dim=1,
                           out=row_block_min[:, t * row_blocks_per_tile:(t + 1) * row_blocks_per_tile])
            if k_b:
                col_block_min[r0:r0 + rc] = torch.amin(tile.view(_BLOCK, col_blocks_per_chunk, rc), dim=0).T
        if k_a:
            n_valid = min(qc, n_a - q0)
            if n_valid > 0:
                top_blocks = torch.topk(row_block_min[:n_valid], m_a, dim=1, largest=False).indices.numpy()
                candidates = _block_members(top_blocks, rc, row_blocks_per_tile, n_b)
                query_index = np.arange(q0, q0 + n_valid)
                d, i = _exact_rerank(a, query_index, b, candidates, k_a, exclude_self)
                dist_a[q0:q0 + n_valid], index_a[q0:q0 + n_valid] = d, i
        if k_b:
            block_ids = torch.arange(c * col_blocks_per_chunk, (c + 1) * col_blocks_per_chunk)
            merged_val = torch.cat([best_col_val, col_block_min], dim=1)
            merged_blk = torch.cat([best_col_blk, block_ids.expand(n_b_pad, -1)], dim=1)
            best_col_val, pick = torch.topk(merged_val, m_b, dim=1, largest=False)
            best_col_blk = torch.gather(merged_blk, 1, pick)

    dist_b = index_b = None
    if k_b:
        dist_b = np.empty((n_b, k_b))
        index_b = np.empty((n_b, k_b), dtype=np.int64)
        blocks = best_col_blk[:n_b].numpy()
        for s in range(0, n_b, qc):
            e = min(s + qc, n_b)
            candidates = _block_members(blocks[s:e], qc, col_blocks_per_chunk, n_a)
            d, i = _exact_rerank(b, np.arange(s, e), a, candidates, k_b, exclude_self)
            dist_b[s:e], index_b[s:e] = d, i
    return dist_a, index_a, dist_b, index_b


def _check_k(name: str, k, available: int, allow_zero: bool = False) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {k!r}")
    k = int(k)
    if k < (0 if allow_zero else 1) or k > available:
        raise ValueError(f"{name}: must be between {0 if allow_zero else 1} and {available}, got {k}")
    return k


def nearest_neighbours(
    queries,
    reference,
    k: int = 2,
    *,
    exclude_self: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    tile_size: int = DEFAULT_TILE_SIZE,
) -> tuple[np.ndarray, np.ndarray]:
    """`(distances, indices)`, each (n_queries, k): the k nearest `reference` rows of each query.

    Exact Euclidean distances (float64), nearest first. `exclude_self=True` is for searching a set
    against itself (row i of `queries` is row i of `reference`): a row is not its own neighbour,
    but an exact duplicate elsewhere is (distance 0).
    """
    q = _as_matrix("queries", queries)
    r = _as_matrix("reference", reference)
    if q.shape[1] != r.shape[1]:
        raise ValueError(f"reference: has {r.shape[1]} features, queries have {q.shape[1]}")
    if exclude_self and q.shape != r.shape:
        raise ValueError("exclude_self: queries and reference must be the same rows")
    k = _check_k("k", k, r.shape[0] - int(exclude_self))
    d, i, _, _ = _search(q, r, k, 0, exclude_self=exclude_self, chunk_size=chunk_size, tile_size=tile_size)
    return d, i


def nearest_distances(
    queries,
    reference,
    k: int = 2,
    *,
    exclude_self: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> np.ndarray:
    """Distances (n_queries, k) from each query row to its k nearest `reference` rows, nearest first."""
    return nearest_neighbours(queries, reference, k, exclude_self=exclude_self, chunk_size=chunk_size)[0]


def mutual_nearest_neighbours(
    a,
    b,
    k_a: int = 2,
    k_b: int = 1,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    tile_size: int = DEFAULT_TILE_SIZE,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Both directions from one pass: `((dist, idx) of the k_a nearest b-rows per a-row,
    (dist, idx) of the k_b nearest a-rows per b-row)`. Either k may be 0 (that side is `None`)."""
    x = _as_matrix("a", a)
    y = _as_matrix("b", b)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"b: has {y.shape[1]} features, a has {x.shape[1]}")
    k_a = _check_k("k_a", k_a, y.shape[0], allow_zero=True)
    k_b = _check_k("k_b", k_b, x.shape[0], allow_zero=True)
    da, ia, db, ib = _search(x, y, k_a, k_b, exclude_self=False, chunk_size=chunk_size, tile_size=tile_size)
    return (da, ia), (db, ib)


def distance_membership_scores(candidates_encoded, synthetic_encoded) -> np.ndarray:
    """Membership score per candidate = −(distance to its nearest synthetic row); higher = member.

    See the module docstring for the threat model: only the synthetic release is used.
    """
    return -nearest_distances(candidates_encoded, synthetic_encoded, k=1)[:, 0]
