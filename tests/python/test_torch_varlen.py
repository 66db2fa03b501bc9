"""kaiten.torch with documents of varying length on gloo: presplit packs
documents (kaiten.pack, balanced, its order searched for GPipe on 2
ranks) into torch's pre-split micro-batches,
and a 2-rank pipeline (ScheduleGPipe, one process per rank) trained on
them gives the loss and gradients of the same model run on the same
micro-batches in one process (mean over the step's real tokens). A
model with block-diagonal attention (document_mask) gives each document
the loss it has alone. Skips (77) without torch or without pre-split
micro-batches in the installed release."""
import os
import socket
import sys
import tempfile

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
except ImportError:
    print("test_torch_varlen: SKIP: torch is not installed")
    sys.exit(77)

import kaiten
import kaiten.torch as kt

V, C, T, M = 64, 16, 48, 4


class Embed(nn.Module):
    """Tokens and positions, then one head of attention masked by document."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(T, C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)

    def forward(self, tokens, positions):
        x = self.tok(tokens) + self.pos(positions)
        q, k, v = self.qkv(x).split(C, dim=-1)
        s = q @ k.transpose(-1, -2) / C ** 0.5
        s = s.masked_fill(~kt.document_mask(positions[0]), float("-inf"))
        return x + self.proj(torch.softmax(s, dim=-1) @ v)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.out = nn.LayerNorm(C), nn.Linear(C, V)

    def forward(self, x):
        return self.out(self.ln(x))


def models():
    torch.manual_seed(3)
    return Embed(), Head()


def documents():
    g = torch.Generator().manual_seed(5)
    lengths = [int(x) for x in torch.randint(3, 30, (14,), generator=g)]
    return [torch.randint(0, V, (n,), generator=g) for n in lengths]


def loss_fn_for(tokens):
    def loss_fn(logits, target):
        return nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1),
                                           ignore_index=-100, reduction="sum") / tokens
    return loss_fn


def rank_main(rank, port, out):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    arg_mbs, target_mbs, p = kt.presplit(documents(), M, T, schedule="gpipe")
    mod = models()[rank]
    stage = PipelineStage(mod, rank, 2, torch.device("cpu"))
    sched = ScheduleGPipe(stage, M, loss_fn=loss_fn_for(sum(p.tokens)), scale_grads=False)
    losses = []
    if rank == 0:
        sched.step(arg_mbs=arg_mbs)
    else:
        sched.step(target_mbs=target_mbs, losses=losses)
    torch.save({"grads": [q.grad for q in mod.parameters()],
                "losses": [float(x.detach()) for x in losses]}, "%s.%d" % (out, rank))
    dist.destroy_process_group()


def reference():
    embed, head = models()
    arg_mbs, target_mbs, p = kt.presplit(documents(), M, T, schedule="gpipe")
    loss_fn, total = loss_fn_for(sum(p.tokens)), 0.0
    for (tok, pos), tgt in zip(arg_mbs, target_mbs):
        loss = loss_fn(head(embed(tok, pos)), tgt)
        loss.backward()
        total += float(loss.detach())
    return embed, head, total, p


def alone_equals_packed():
    """Each document run alone has the loss it has packed: no attention
    crosses documents and positions restart."""
    embed, head = models()
    docs = documents()
    arg_mbs, target_mbs, p = kt.presplit(docs, M, T)
    loss = nn.functional.cross_entropy
    bad = 0
    for (tok, pos), tgt, mb in zip(arg_mbs, target_mbs, p.micro_batches):
        with torch.no_grad():
            packed = loss(head(embed(tok, pos))[0], tgt[0], ignore_index=-100, reduction="sum")
        alone = 0.0
        for i in mb:
            d = docs[i]
            n = d.numel() - 1
            with torch.no_grad():
                alone += float(loss(head(embed(d[None, :-1], torch.arange(n)[None]))[0], d[1:],
                                    reduction="sum"))
        bad += abs(float(packed) - alone) > 1e-4 * abs(alone)
    return bad


def main():
    if not kt.supports_presplit():
        print("test_torch_varlen: SKIP: torch %s has no pre-split micro-batches" % torch.__version__)
        return 77
    checks, fails = 0, 0

    def check(ok, what):
        nonlocal checks, fails
        checks += 1
        if not ok:
            fails += 1
            print("FAIL:", what)

    lengths = [d.numel() - 1 for d in documents()]
    p = kaiten.pack("gpipe", 2, documents=lengths, microbatches=M, mb_tokens=T)
    f = kaiten.pack("gpipe", 2, documents=lengths, microbatches=M, mb_tokens=T, packing="fifo")
    got = sorted(i for mb in p.micro_batches for i in mb)
    fifo = sorted(i for mb in f.micro_batches for i in mb)
    check(max(p.tokens) <= T, "balanced micro-batches within the budget: %r" % (p.tokens,))
    check(set(got) <= set(fifo) and len(got) + p.left_out == len(fifo),
          "balanced packs fifo's documents: %r vs %r" % (got, fifo))
    check(alone_equals_packed() == 0, "packed documents' losses equal theirs alone")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r")
        mp.spawn(rank_main, args=(port, out), nprocs=2, join=True)
        got = [torch.load("%s.%d" % (out, r)) for r in range(2)]
    embed, head, total, _ = reference()
    check(abs(sum(got[1]["losses"]) - total) <= 1e-5 * abs(total),
          "pipeline loss %r vs one process %r" % (sum(got[1]["losses"]), total))
    for r, mod in enumerate((embed, head)):
        for g, q in zip(got[r]["grads"], mod.parameters()):
            err = float((g - q.grad).norm() / q.grad.norm())
            check(err < 1e-5, "rank %d gradient rel err %.3g" % (r, err))
    print("test_torch_varlen.py: %d checks, %d failed: %s" % (checks, fails, "FAIL" if fails else "OK"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
