"""The lesson's findings, and the code's invariants, as claims a pipeline run upholds or not
(claims.yaml).

A claim is a *finding* (it depends on training results) or a *check* (deterministic arithmetic, such as
a parameter count, or an untrained probe). Its quantities are small arithmetic expressions over the
pipeline's reports and the runs' curves:

    loss("placement/post/seed0")             train_loss_last25 of one run
    metric("depth/l1/seed0", "n_params")      any field of one run
    mean("placement/pre", "val_loss")        the seed mean of a variant (field defaults to train_loss_last25),
                                              with its 95% Student-t interval
    std("placement/pre", "val_loss")         the seed standard deviation of a variant (n - 1 in the denominator)
    seeds("placement/post")                  every seed's value, as a list (a claim must hold for each)
    window("exercise2/post", 1, 500)          per seed, the mean of a curve column (default the training loss)
                                              over steps 1 to 500, as a seed mean with its interval
    at("exercise2/post", 500, "val_loss")     per seed, a curve column at one step, likewise
    baseline("unigram")                       reports/metrics.json baselines
    published("table_a", "placement/post/seed0")
                                              a published figure (reference.yaml); on another corpus than the
                                              one it was published on, the claim is "not comparable"
    grad("pre/with", 12)                      reports/gradients.json
    grads("pre/without")                      every depth's value, shallow to deep, as a list
    lr_sensitivity("stability/post", "w0")    per seed, a map variant's LR sensitivity over one group of cells
                                              (blocklab.analysis.maps: here no warmup), as a seed mean with its interval
    max_trainable_lr("stability/post", "w0")  per seed, the largest learning rate of that group at which the
                                              seed trains (neither collapsed nor diverged; null: at none)
    best_lr("proxies/standard", "d128")       per seed, the learning rate of that group with the lowest final
                                              validation loss (a diverged run is no candidate)
    lowest("dyt_alpha/dyt/dyt_alpha0.1_lr0.003", "dyt_alpha/dyt/dyt_alpha0.5_lr0.003")
                                              per seed, the final validation loss of whichever variant ends lowest
                                              on the seed mean (a setting tuned by the mean, not seed by seed)
    highest(...)                              likewise, whichever ends highest (worst minus best: a sensitivity)

combined with + - * /, abs() and log10(). Arithmetic over two seed means trained on the same seeds is per seed
(the difference is paired); over different seeds, + and - give Welch's interval (blocklab.analysis.intervals).

A `trend` claim reads no expression: two variants of a map (`map`, `left`, `right`) over its sizes, and what
its paper expects of their effect as the model grows (`expect`: grows, shrinks, flips, or flat within `margin`),
decided on the effect's slope against log10 of the training compute, paired by seed (claims/trends.py). Nor
do the two on whether the smallest size predicts the largest (claims/transfer.py): an `agreement` claim reads
every trend finding of the file, the share whose verdict at the smallest size is the largest's, tested against
`than`; a `rank_agreement` claim ranks `variants` of `map` at its smallest and largest size (Kendall's tau).

Verdicts: `holds`, `fails`, `inconclusive` (a finding over seed means whose interval does not decide it)
or `not comparable`. A comparison holds when the whole 95% interval lies on the claimed side and fails
when it lies wholly on the other; `within` holds when the 90% interval lies inside the tolerance (an
equivalence test, two one-sided tests at 5%) and fails when the 95% interval lies wholly outside;
`monotone` holds when every step is decisive. Values of single runs and `seeds(...)` lists are decided
value by value. A run or field that is missing is an error (the pipeline broke), never a verdict. A
value a run recorded as null (a diverged run has no finite loss) makes the quantities it enters null,
and a claim over a null quantity fails, naming it.
"""

from blocklab.analysis.claims.expressions import value_of
from blocklab.analysis.claims.evidence import LOSS, NOT_RUN, MissingResult, NotComparable, NotRunYet, Evidence
from blocklab.analysis.claims.rules import (
    CLAIMS_FILE, EQUIVALENCE_CONFIDENCE, Agreement, Compare, Exact, Monotone, RankAgreement, Spread, Trend, Verdict, Within,
    bound_of, check_claims,
    claims_count, load_claims,
)
from blocklab.analysis.claims.words import (
    count_in_words, decided_alone_in_words, failing_in_words, holding_alone, marked_in_words, verdicts_markdown,
)

__all__ = ["CLAIMS_FILE", "EQUIVALENCE_CONFIDENCE", "LOSS", "NOT_RUN", "Agreement", "Compare", "Exact", "MissingResult", "Monotone",
           "NotComparable", "NotRunYet", "Evidence", "RankAgreement", "Spread", "Trend", "Verdict", "Within", "bound_of", "check_claims", "claims_count",
           "count_in_words", "decided_alone_in_words", "failing_in_words", "holding_alone", "load_claims", "marked_in_words", "value_of",
           "verdicts_markdown"]
