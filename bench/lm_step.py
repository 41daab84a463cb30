"""One marginal-likelihood update of ``segrl lm train``'s ``slm`` with its default lexicon, with
fused and unfused Adam, and with the lexicon's logits projected from the context or direct, in one
run.

Builds the model ``segrl lm train`` builds on a word list (``slm`` without context, the 100,000
substrings found in the most training word types, about 51 million parameters in the lexicon) and
times ``LMTrainer.marginal_step`` on the same batches of training word types with Adam fused (what
``LMTrainer`` uses) and unfused (PyTorch's default on a CPU), from the same initial weights. Prints
the median seconds per update of each, their ratio, and the lexicon's description length's share
(``--lexicon-cost``). Then the same priced update with ``lexicon_logits = "direct"`` (two logits an
entry instead of about ``hidden_dim`` weights; a model of its own, from the same seed). The weights'
values do not change the cost of an update.

    .venv/bin/python bench/lm_step.py                    # wordfreq:en, 64 words a batch
    .venv/bin/python bench/lm_step.py --corpus wordfreq:hu --updates 20
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import random
import statistics
import time

import torch

from segrl.config import DataConfig
from segrl.data import load_corpus
from segrl.lm import LMConfig, build_lm
from segrl.lm.config import resolve_lm_config
from segrl.lm.lexicon import slm_lexicon
from segrl.lm.training import LMTrainer


def seconds_per_update(trainer: LMTrainer, batches: list[list[str]]) -> float:
    """Median wall time of one ``marginal_step`` over ``batches`` (after one warm-up update)."""
    trainer.marginal_step(batches[0])
    times = []
    for batch in batches[1:]:
        started = time.perf_counter()
        trainer.marginal_step(batch)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="wordfreq:en")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lexicon-cost", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = load_corpus(DataConfig(corpus=args.corpus))
    unset = LMConfig(context="none", lexicon_size=None, length_penalty=None)  # by LM_DEFAULTS
    options = resolve_lm_config(unset, corpus.kind)
    words = sorted(corpus.word_counts("train"))
    lexicon = slm_lexicon(options, words)
    torch.manual_seed(0)
    model = build_lm(options, corpus.vocab, lexicon)
    initial = copy.deepcopy(model.state_dict())
    order = words[:]
    random.Random(0).shuffle(order)
    batches = [
        order[i * args.batch_size : (i + 1) * args.batch_size] for i in range(args.updates + 1)
    ]
    lexicon_params = sum(p.numel() for p in model.lexicon.parameters())
    print(f"{args.corpus}: {len(lexicon):,} lexicon entries, {lexicon_params:,} parameters in it")

    def timed(fused: bool, cost: float) -> float:
        model.load_state_dict(initial)
        model.config = dataclasses.replace(options, lexicon_cost=cost)
        trainer = LMTrainer(model, corpus=words)
        if not fused:
            trainer.optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, foreach=False)
        return seconds_per_update(trainer, batches)

    torch.manual_seed(0)
    direct_options = dataclasses.replace(
        options, lexicon_cost=args.lexicon_cost, lexicon_logits="direct"
    )
    direct_model = build_lm(direct_options, corpus.vocab, lexicon)
    direct = seconds_per_update(LMTrainer(direct_model, corpus=words), batches)
    direct_params = sum(p.numel() for p in direct_model.lexicon.parameters())

    unfused = timed(False, 0.0)
    fused = timed(True, 0.0)
    priced = timed(True, args.lexicon_cost)
    print(f"unfused Adam: {unfused:.3f} s per update")
    print(f"fused Adam:   {fused:.3f} s per update  ({unfused / fused:.2f}x faster)")
    print(
        f"fused, lexicon cost {args.lexicon_cost}: {priced:.3f} s per update "
        f"({priced / fused:.2f}x the update without it)"
    )
    print(
        f"direct lexicon logits ({direct_params:,} parameters in the lexicon), lexicon cost "
        f"{args.lexicon_cost}: {direct:.3f} s per update ({priced / direct:.2f}x faster than "
        "projected)"
    )


if __name__ == "__main__":
    main()
