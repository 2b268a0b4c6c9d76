"""Neural networks on PyTorch: layers, models, training, checkpoints.

Models are ordinary :class:`torch.nn.Module` s holding their normalisation as buffers, so
they train, run in the engine's update loop and can be differentiated through.

- :mod:`kinema.nn.layers`: Normaliser, RMSNorm, FiLM, MLP blocks, straight-through Gumbel.
- :mod:`kinema.nn.models`: MLP, SequenceMLP, Autoencoder (+ variational), CodebookMatching.
- :mod:`kinema.nn.mamba`: Mamba backbone (sequential/parallel scan, O(1) ``step``).
- :mod:`kinema.nn.retrieval`: retrieval-augmented Mamba controller.
- :mod:`kinema.nn.train`: Trainer (AdamW, warm restarts, AMP, early stopping, resume).
- :mod:`kinema.nn.checkpoint`: safetensors checkpoints with JSON metadata.
- :mod:`kinema.nn.distributed`: DDP with torchrun (gloo on CPU).
- :mod:`kinema.nn.quantize`: dynamic int8 quantisation for CPU inference.
- :mod:`kinema.nn.inversion`: gradient descent on a model's input (backprop through inference).
"""
from __future__ import annotations

from kinema.nn.checkpoint import MODEL_CLASSES, load_checkpoint, read_metadata, save_checkpoint
from kinema.nn.inversion import optimise_input
from kinema.nn.mamba import Mamba, MambaState
from kinema.nn.models import MLP, Autoencoder, CodebookMatching, SequenceMLP
from kinema.nn.quantize import quantize_dynamic
from kinema.nn.train import TrainConfig, Trainer, seed_everything

__all__ = ["MODEL_CLASSES", "load_checkpoint", "read_metadata", "save_checkpoint", "optimise_input",
           "Mamba", "MambaState", "MLP", "Autoencoder", "CodebookMatching", "SequenceMLP",
           "quantize_dynamic", "TrainConfig", "Trainer", "seed_everything"]
