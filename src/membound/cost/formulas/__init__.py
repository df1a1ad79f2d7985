"""Cost formulas, one module per op family; importing this package registers them all."""

from membound.cost.formulas import (  # noqa: F401
    add_norm,
    attention,
    conv,
    foreach,
    inductor,
    matmul,
    memory,
    norm,
    pointwise,
    pool,
    reduction,
    rnn,
    softmax,
    upsample,
)
