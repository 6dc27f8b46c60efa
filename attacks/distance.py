"""Distance-based membership inference against a synthetic data release, and its kNN engine.

Threat model: the attacker sees ONLY the released synthetic table (no generator, no parameters,
no query access) plus candidate records whose membership in the generator's training set is in
question. A generator that memorises puts synthetic rows very close to its training rows, so a
candidate's distance to the nearest synthetic row is smaller for members than for non-members
(Chen, Yu, Zhang, Fritz 2020, "GAN-Leaks: A Taxonomy of Membership Inference Attacks against
Generative Models", arXiv 1909.03935, the "full black-box" attack; Yale et al. 2019, DCR).

Distances are Euclidean on the `targets.tabular_encoding.MixedTypeEncoder` encoding, i.e. the
root-mean-square Gower distance documented there. The exact k-nearest-neighbour search below is
shared with the DCR/NNDR checks in `audit.statistics.synthetic_metrics`; it lives here because attacks/ must
not import audit/.

How the search stays fast and memory-bounded without approximation
-------------------------------------------------------------------
1. Both sides are centred and rotated onto the span of their rows (`_isometric_reduction`:
   distances unchanged, fewer coordinates — one-hot blocks lose one each). Squared distances
   for a (query chunk × reference tile) then come from ONE float32 matrix product on augmented
   vectors [−2a, |a|², 1]·[b, 1, |b|²]. A 1024 × 1024 tile (4 MiB) stays in cache; nothing
   N × M is ever held (memory ~ chunk × n_reference / 16 floats per thread).
2. Each tile is reduced to *block minima*: rows are partitioned into blocks of 16 and only each
   block's smallest (approximate) distance is kept. If blocks are ranked by their exact minima,
   the k nearest neighbours lie in the first k blocks (each of the first k blocks holds a
   distinct row at most as far as the j-th neighbour). Keeping k + 2 blocks (k ≥ 2), or the best
   two of the per-tile winners (k = 1), absorbs the float32 error of step 1.
3. The rows of the kept blocks are re-ranked with exact distances computed from differences
   (no cancellation: an exact copy has distance exactly 0).
The same tile gives, at no extra matrix cost, the nearest neighbours in the other direction
(reference row → nearest query row), which `mutual_nearest_neighbours` returns; a set against
itself (k = 1) only needs the tiles on and above the diagonal. The matrix products are ~half of
the time (they run near the CPU's float32 FMA peak: the width is small, so cost ~ pairs × width);
exact L1 distances (`torch.cdist(p=1)`) measured ~10× slower, hence the Euclidean encoding.
Parallelism is over whole query chunks, one thread each (see `_one_intra_op_thread`).
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch
from threadpoolctl import threadpool_limits

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
DEFAULT_CHUNK_SIZE = 1024  # query rows per chunk
DEFAULT_TILE_SIZE = 1024  # reference rows per tile (1024 × 1024 float32 = 4 MiB: stays in L3)
_THREADS_LOCK = threading.Lock()


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


def _isometric_reduction(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre on b's mean and rotate onto the span of all rows (drops exactly-null directions).

    Distances are unchanged (a translation and an orthonormal projection onto a subspace that
    contains every centred row), but the matrix products get shorter: one-hot blocks have a
    constant row sum, so each categorical column loses one dimension after centring, and the
    "unseen category" coordinates vanish when no row uses them. GEMM time is ~linear in width.
    Smaller centred norms also shrink the float32 cancellation error of the norm trick.
    """
    # One BLAS thread: these products are small (rows × width²), and multi-threaded BLAS spinning
    # on a shared machine cost more CPU than the whole pruned search (measured 4.3 s CPU for 2×100k rows).
    with threadpool_limits(limits=1, user_api="blas"):
        centre = b.mean(axis=0, dtype=np.float64)
        second_moment = np.zeros((a.shape[1], a.shape[1]))
        for x in (a, b):
            for s in range(0, x.shape[0], 65536):
                block = x[s : s + 65536].astype(np.float64) - centre
                second_moment += block.T @ block
        eigenvalues, eigenvectors = np.linalg.eigh(second_moment)
        keep = eigenvalues > 1e-9 * max(eigenvalues.max(), 1e-300)
        basis = eigenvectors[:, keep] if keep.any() else eigenvectors[:, -1:]
        basis32, centre32 = basis.astype(np.float32), centre.astype(np.float32)
        return (a - centre32) @ basis32, (b - centre32) @ basis32


def _augmented(x: np.ndarray, n_padded: int, query_side: bool) -> torch.Tensor:
    """[−2x, |x|², 1] (query side) or [x, 1, |x|²] (reference side), padded with far-away rows."""
    n, d = x.shape
    out = np.zeros((n_padded, d + 2), dtype=np.float32)
    norms = np.einsum("ij,ij->i", x, x, dtype=np.float64).astype(np.float32)
    if query_side:
        out[:n, :d] = -2.0 * x
        out[:n, d] = norms
        out[n:, d] = _FAR
        out[:, d + 1] = 1.0
    else:
        out[:n, :d] = x
        out[:, d] = 1.0
        out[:n, d + 1] = norms
        out[n:, d + 1] = _FAR
    return torch.from_numpy(out)


def _exact_rerank(
    queries: torch.Tensor,
    query_index: torch.Tensor,
    reference: torch.Tensor,
    candidates: torch.Tensor,
    k: int,
    exclude_self: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k among `candidates` (rows of `reference`, −1 = none) for each query row."""
    valid = candidates >= 0
    safe = torch.where(valid, candidates, 0)
    n, m = safe.shape
    picked = reference.index_select(0, safe.reshape(-1)).view(n, m, -1)
    # From differences, not the norm trick: an exact copy gets exactly 0.
    picked.sub_(queries.index_select(0, query_index).unsqueeze(1))
    dist = torch.linalg.vector_norm(picked, dim=2)
    dist.masked_fill_(~valid, math.inf)
    if exclude_self:
        dist.masked_fill_(safe == query_index.unsqueeze(1), math.inf)
    best, order = torch.topk(dist, k, dim=1, largest=False, sorted=True)
    return best.double().numpy(), torch.gather(safe, 1, order).numpy()


def _block_members(block_ids: torch.Tensor, tile: int, per_tile: int, n_rows: int) -> torch.Tensor:
    """Rows of blocks: block β of tile t = β // per_tile holds rows t·tile + β % per_tile + s·per_tile."""
    t, b = torch.div(block_ids, per_tile, rounding_mode="floor"), block_ids % per_tile
    rows = (t * tile + b).unsqueeze(-1) + per_tile * torch.arange(_BLOCK)
    rows = rows.reshape(*block_ids.shape[:-1], -1)
    return torch.where(rows < n_rows, rows, -1)


@contextmanager
def _one_intra_op_thread():
    # Many small GEMMs with OpenMP threads stall on shared/oversubscribed CPUs (each barrier waits
    # for a descheduled thread: measured 150 s vs 9 s per 1e10 pairs on 2 busy cores), so the
    # search parallelises over whole query chunks instead and runs each op single-threaded.
    with _THREADS_LOCK:
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield previous
        finally:
            torch.set_num_threads(previous)


class _BestTwoBlocks:
    """Per row: the two smallest (approximate block minimum, block id) pairs seen so far.

    Fed one candidate block per row and tile (that tile's best), it always holds the row's best
    block overall, which is all k = 1 needs; the runner-up is a margin for float32 error.
    """

    def __init__(self, n_rows: int):
        self.v1 = torch.full((n_rows,), float(_FAR))
        self.b1 = torch.zeros(n_rows, dtype=torch.int64)
        self.v2 = self.v1.clone()
        self.b2 = self.b1.clone()

    def offer(self, start: int, block_min: torch.Tensor, dim: int, first_block: int) -> None:
        """Offer one tile's block minima for rows start.. (`block_min` has the blocks along `dim`)."""
        value = block_min.amin(dim=dim)
        # Most tiles improve nothing once a row has seen a few: find the block only where needed.
        improved = torch.nonzero(value < self.v2[start : start + value.shape[0]]).squeeze(1)
        if improved.numel() == 0:
            return
        value = value.index_select(0, improved)
        block = block_min.index_select(1 - dim, improved).argmin(dim=dim) + first_block
        rows = improved + start
        v1, b1 = self.v1.index_select(0, rows), self.b1.index_select(0, rows)
        first = value < v1
        self.v2.index_copy_(0, rows, torch.where(first, v1, value))
        self.b2.index_copy_(0, rows, torch.where(first, b1, block))
        self.v1.index_copy_(0, rows, torch.where(first, value, v1))
        self.b1.index_copy_(0, rows, torch.where(first, block, b1))

    @staticmethod
    def best_blocks(states: list[_BestTwoBlocks], n_rows: int) -> torch.Tensor:
        values = torch.stack([x for s in states for x in (s.v1, s.v2)], dim=1)[:n_rows]
        blocks = torch.stack([x for s in states for x in (s.b1, s.b2)], dim=1)[:n_rows]
        keep = torch.topk(values, 2, dim=1, largest=False).indices
        return torch.gather(blocks, 1, keep)


def _search(
    a: np.ndarray,
    b: np.ndarray,
    k_a: int,
    nearest_b: bool,
    *,
    exclude_self: bool,
    chunk_size: int,
    tile_size: int,
    n_threads: int | None = None,
    tiles_of_chunk=None,
):
    """The k_a nearest rows of b for each row of a; if `nearest_b`, also the nearest a-row per b-row.

    `exclude_self` (a is b): with k_a = 1 only the tiles on and above the diagonal are computed
    and each serves both of its sides (half the matrix products).
    `tiles_of_chunk(q0, q1, rc)` (optional) restricts query rows q0..q1 to the reference tiles
    range(t0, t1) it returns: the answers are then the nearest rows among those tiles only
    (distance inf, index −1 where no row was seen); `attacks.distance_groups` uses it and
    checks which answers are the global ones.
    """
    n_a, n_b = a.shape[0], b.shape[0]
    symmetric = exclude_self and k_a == 1
    qc = _round_up(max(chunk_size, _BLOCK), _BLOCK)
    rc = _round_up(max(min(tile_size, _round_up(n_b, _BLOCK)), _BLOCK), _BLOCK)
    if symmetric:
        qc = rc = min(qc, rc)  # same partition into blocks on both sides of a tile
        nearest_b = False
    n_a_pad, n_b_pad = _round_up(n_a, qc), _round_up(n_b, rc)
    row_blocks_per_tile, col_blocks_per_chunk = rc // _BLOCK, qc // _BLOCK
    n_row_blocks = n_b_pad // _BLOCK
    n_chunks, n_tiles = n_a_pad // qc, n_b_pad // rc

    a_low, b_low = _isometric_reduction(a, b)
    a_aug = _augmented(a_low, n_a_pad, query_side=True)
    b_aug = _augmented(b_low, n_b_pad, query_side=False)
    a_t, b_t = torch.from_numpy(a), torch.from_numpy(b)
    far = float(_FAR)

    dist_a = np.empty((n_a, k_a)) if k_a else None
    index_a = np.empty((n_a, k_a), dtype=np.int64) if k_a else None

    def run_chunks(chunks: list[int]):
        tile = torch.empty((qc, rc), dtype=torch.float32)
        block_min = torch.empty((qc, n_row_blocks)) if k_a >= 2 else None
        rows_state = _BestTwoBlocks(n_a_pad) if k_a == 1 else None
        cols_state = rows_state if symmetric else (_BestTwoBlocks(n_b_pad) if nearest_b else None)
        for c in chunks:
            q0 = c * qc
            a_chunk = a_aug[q0 : q0 + qc]
            t_first, t_stop = c if symmetric else 0, n_tiles
            if tiles_of_chunk is not None:
                t_first, t_stop = tiles_of_chunk(q0, min(q0 + qc, n_a), rc)
            for t in range(t_first, t_stop):
                r0 = t * rc
                torch.mm(a_chunk, b_aug[r0 : r0 + rc].T, out=tile)
                if exclude_self:
                    lo, hi = max(q0, r0), min(q0 + qc, r0 + rc, n_a)
                    if lo < hi:
                        diag = torch.arange(lo, hi)
                        tile[diag - q0, diag - r0] = far
                if k_a:
                    # Strided blocks (rows r0 + s·W + β, s < 16) make this a middle-axis
                    # reduction, which vectorises; contiguous blocks would be innermost (≈10× slower).
                    tile_blocks = torch.amin(tile.view(qc, _BLOCK, row_blocks_per_tile), dim=1)
                    if block_min is not None:
                        block_min[:, t * row_blocks_per_tile : (t + 1) * row_blocks_per_tile] = tile_blocks
                    elif rows_state is not None:  # k_a == 1: always set
                        rows_state.offer(q0, tile_blocks, 1, t * row_blocks_per_tile)
                if cols_state is not None and not (symmetric and t == c):
                    col_blocks = torch.amin(tile.view(_BLOCK, col_blocks_per_chunk, rc), dim=0)
                    cols_state.offer(r0, col_blocks, 0, c * col_blocks_per_chunk)
            n_valid = min(qc, n_a - q0)
            # block_min is set only when k_a ≥ 2, and then so are dist_a and index_a.
            if block_min is not None and dist_a is not None and index_a is not None and n_valid > 0:
                b0, b1 = t_first * row_blocks_per_tile, t_stop * row_blocks_per_tile
                if b1 <= b0:
                    dist_a[q0 : q0 + n_valid], index_a[q0 : q0 + n_valid] = math.inf, -1
                    continue
                m = min(k_a + _EXTRA_BLOCKS, b1 - b0)
                top_blocks = torch.topk(block_min[:n_valid, b0:b1], m, dim=1, largest=False).indices + b0
                candidates = _block_members(top_blocks, rc, row_blocks_per_tile, n_b)
                d, i = _exact_rerank(a_t, torch.arange(q0, q0 + n_valid), b_t, candidates, k_a, exclude_self)
                dist_a[q0 : q0 + n_valid], index_a[q0 : q0 + n_valid] = d, i
        return rows_state, cols_state

    def rerank_from_states(pool, states, n_rows, queries, reference, n_reference, tile, per_tile, into):
        blocks = _BestTwoBlocks.best_blocks(states, n_rows)
        dist, index = into

        def rerank(start: int) -> None:
            stop = min(start + 4096, n_rows)
            candidates = _block_members(blocks[start:stop], tile, per_tile, n_reference)
            dist[start:stop], index[start:stop] = _exact_rerank(
                queries, torch.arange(start, stop), reference, candidates, 1, exclude_self
            )

        list(pool.map(rerank, range(0, n_rows, 4096)))

    with _one_intra_op_thread() as available:
        workers = max(1, min(n_threads or available, n_chunks))
        # Interleaved chunks balance the work when the symmetric search skips lower tiles.
        assignments = [list(range(w, n_chunks, workers)) for w in range(workers)]
        with ThreadPoolExecutor(workers) as pool:
            states = list(pool.map(run_chunks, assignments))
            if k_a == 1:
                rerank_from_states(
                    pool, [s[0] for s in states], n_a, a_t, b_t, n_b, rc, row_blocks_per_tile, (dist_a, index_a)
                )
            dist_b = index_b = None
            if nearest_b:
                dist_b = np.empty((n_b, 1))
                index_b = np.empty((n_b, 1), dtype=np.int64)
                rerank_from_states(
                    pool, [s[1] for s in states], n_b, b_t, a_t, n_a, qc, col_blocks_per_chunk, (dist_b, index_b)
                )
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
    d, i, _, _ = _search(q, r, k, False, exclude_self=exclude_self, chunk_size=chunk_size, tile_size=tile_size)
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
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    tile_size: int = DEFAULT_TILE_SIZE,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Both directions from one pass over the a × b distances:
    `((dist, idx) of the k_a nearest b-rows per a-row, (dist, idx) of the nearest a-row per b-row)`,
    shapes (n_a, k_a) and (n_b, 1). `k_a` may be 0 (that side is `(None, None)`)."""
    x = _as_matrix("a", a)
    y = _as_matrix("b", b)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"b: has {y.shape[1]} features, a has {x.shape[1]}")
    k_a = _check_k("k_a", k_a, y.shape[0], allow_zero=True)
    da, ia, db, ib = _search(x, y, k_a, True, exclude_self=False, chunk_size=chunk_size, tile_size=tile_size)
    return (da, ia), (db, ib)


def distance_membership_scores(candidates_encoded, synthetic_encoded) -> np.ndarray:
    """Membership score per candidate = −(distance to its nearest synthetic row); higher = member.

    See the module docstring for the threat model: only the synthetic release is used.
    """
    return -nearest_distances(candidates_encoded, synthetic_encoded, k=1)[:, 0]
