"""Train vhx-mini, the small LLaVA that vhx's offline commands score (see vhx.mini and its model card).

    python recipes/train_mini.py --config vhx-mini --output_dir vhx/mini/zoo/vhx-mini          # about 25 min on 2 CPU cores
    python recipes/train_mini.py --config vhx-mini-yes --output_dir vhx/mini/zoo/vhx-mini-yes  # the yes-biased twin
    python recipes/train_mini.py --config vhx-mini-neg --output_dir vhx/mini/zoo/vhx-mini-neg  # misreads negation
    python recipes/train_mini.py --config vhx-mini-weak --output_dir vhx/mini/zoo/vhx-mini-weak  # weaker eyes
    accelerate launch recipes/train_mini.py --config vhx-mini --output_dir runs/mini      # on GPUs
    python recipes/train_mini.py --config vhx-mini-smoke --output_dir /tmp/mini           # a reduced run (tests)

``--config`` takes a YAML file or a bundled config name; every key is also a ``--flag``: the fields of
vhx.mini.MiniModelArguments and MiniDataArguments and of transformers' TrainingArguments.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from vhx.mini import format_table, parse_mini_args, train_mini


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the config, train, save, evaluate and print the evaluation table."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    result = train_mini(*parse_mini_args(argv))
    record = result.record
    print(f"saved {result.output_dir} ({record['parameters'] / 1e6:.2f}M parameters, {record['size_bytes'] / 1e6:.1f} MB) "
          f"after {record['train_seconds'] / 60:.1f} min of training")
    if result.evaluation:
        print(format_table(result.evaluation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
