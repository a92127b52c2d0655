"""Where trained vhx-mini checkpoints live as package data (``vhx/zoo/vhx-mini/``, ``vhx/zoo/vhx-mini-yes/``).

``python recipes/train_mini.py --config vhx-mini --output_dir vhx/zoo/vhx-mini`` writes one; once a
folder is here, :func:`vhx.mini.resolve_model` (and so ``load_model("vhx-mini")``) finds it.
"""
