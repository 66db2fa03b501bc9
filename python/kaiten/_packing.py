"""Documents of varying length into micro-batches of a token budget, and
the order the micro-batches run in (the Python side of `kaiten train
--doc-lengths ... --packing fifo|balanced`).

    p = kaiten.pack([700, 40, 300, 200, 90], microbatches=2, budget=1024)
    p.microbatches   # [[0], [1, 2, 3, 4]]: document indices, in run order
    p.order          # the micro-batches' fill indices in run order
    p.tokens         # tokens each holds, in run order
    p.left_out       # documents that fit nowhere

fifo fills the micro-batches in data order (a document that does not fit
the current one starts the next); balanced assigns the documents fifo would
use, longest first, to the micro-batch with the least work (L + L^2 /
attn_tokens each) that has room, and runs the heaviest first. Given
micro-batches already formed (a list of lists of lengths), only the order
is chosen.
"""

__all__ = ["Packing", "pack"]


class Packing:
    """The result of pack(): micro-batches in run order."""

    def __init__(self, microbatches, order, tokens, work, left_out):
        self.microbatches = microbatches
        self.order = order
        self.tokens = tokens
        self.work = work
        self.left_out = left_out

    def __repr__(self):
        return "Packing(tokens=%r, order=%r, left_out=%r)" % (self.tokens, self.order, self.left_out)


def _work(lengths, attn):
    return sum(n + n * n / attn for n in lengths)


def _fifo(lengths, m, budget):
    bins, used = [[] for _ in range(m)], 0
    j, left = 0, []
    for i, n in enumerate(lengths):
        if n > budget:
            left.append(i)
            continue
        if used + n > budget:
            j, used = j + 1, 0
        if j >= m:
            left.extend(range(i, len(lengths)))
            break
        bins[j].append(i)
        used += n
    return bins, left


def _balanced(lengths, bins, m, budget, attn):
    placed = sorted((i for b in bins for i in b), key=lambda i: (-lengths[i], i))
    out, tok, work, left = [[] for _ in range(m)], [0] * m, [0.0] * m, []
    for i in placed:
        fits = [j for j in range(m) if tok[j] + lengths[i] <= budget]
        if not fits:
            left.append(i)
            continue
        j = min(fits, key=lambda j: (work[j], j))
        out[j].append(i)
        tok[j] += lengths[i]
        work[j] += lengths[i] + lengths[i] * lengths[i] / attn
    for b in out:
        b.sort()  # data order inside a micro-batch
    return out, left


def pack(lengths, microbatches=None, budget=None, packing="balanced", attn_tokens=None):
    """Packs document lengths (ints) into `microbatches` micro-batches of at
    most `budget` tokens, or orders micro-batches given as lists of their
    documents' lengths. attn_tokens weighs the quadratic attention term (the
    tokens at which a document's attention costs as much as the rest of
    its work; default 1024). Raises ValueError for a bad argument."""
    if packing not in ("fifo", "balanced"):
        raise ValueError("packing %r: expected fifo or balanced" % (packing,))
    attn = float(attn_tokens or 1024)
    if attn <= 0:
        raise ValueError("attn_tokens %r must be positive" % (attn_tokens,))
    lengths = list(lengths)
    if lengths and all(isinstance(x, (list, tuple)) for x in lengths):  # formed micro-batches
        groups = [list(g) for g in lengths]
        if any(int(n) < 1 for g in groups for n in g):
            raise ValueError("document lengths must be >= 1")
        order = list(range(len(groups)))
        if packing == "balanced":
            order.sort(key=lambda j: (-_work(groups[j], attn), j))
        offs, at = [], 0
        for g in groups:
            offs.append(list(range(at, at + len(g))))
            at += len(g)
        return Packing([offs[j] for j in order], order, [sum(groups[j]) for j in order],
                       [_work(groups[j], attn) for j in order], [])
    if microbatches is None or budget is None:
        raise ValueError("pack(lengths, microbatches, budget): both are needed for document lengths")
    m, budget = int(microbatches), int(budget)
    if m < 1 or budget < 1:
        raise ValueError("microbatches %r and budget %r must be >= 1" % (microbatches, budget))
    if any(int(n) < 1 for n in lengths):
        raise ValueError("document lengths must be >= 1")
    lengths = [int(n) for n in lengths]
    bins, left = _fifo(lengths, m, budget)
    if packing == "balanced":
        bins, more = _balanced(lengths, bins, m, budget, attn)
        left = sorted(left + more)
    works = [_work([lengths[i] for i in b], attn) for b in bins]
    order = list(range(m))
    if packing == "balanced":
        order.sort(key=lambda j: (-works[j], j))
    return Packing([bins[j] for j in order], order, [sum(lengths[i] for i in bins[j]) for j in order],
                   [works[j] for j in order], left)
