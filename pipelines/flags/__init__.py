"""Command-line flags of the pipelines, in groups, and their translation into library
arguments (so that the pipelines stay thin).

Each group (data, prepare, batching, model, run, training, checkpoint, inference, search,
translate, evaluate, export, import, average, shortlist, distill) is defined by one function,
with each flag's help text; defaults come from the library's config dataclasses where one exists.
"""

# Imported in this order so that the groups are defined in it.
from pipelines.flags.data import (  # noqa: F401
    eval_dataset_kwargs,
    prepare_config_flags,
    prepare_config_from_flags,
    training_dataset_kwargs,
)
from pipelines.flags.groups import (  # noqa: F401
    AVERAGE,
    BATCHING,
    CHECKPOINT,
    DATA,
    DISTILL,
    EVALUATE,
    EXPORT,
    FLAGS,
    IMPORT,
    INFERENCE,
    MODEL,
    PREPARE,
    RUN,
    SEARCH,
    SHORTLIST,
    TRAINING,
    TRANSLATE,
    declare_key_flags,
    define_all_flags,
    group_flags,
)
from pipelines.flags.inference import (  # noqa: F401, I001
    SEARCH_FLAG_FIELDS,
    search_config_from_flags,
)
from pipelines.flags.model import model_config_from_flags  # noqa: F401
from pipelines.flags.training import training_config_from_flags  # noqa: F401

from pipelines.flags.averaging import define_average_flags  # noqa: F401, E402  # isort: skip
from pipelines.flags.shortlist import define_shortlist_flags  # noqa: F401, E402  # isort: skip
from pipelines.flags.distillation import define_distill_flags  # noqa: F401, E402  # isort: skip
