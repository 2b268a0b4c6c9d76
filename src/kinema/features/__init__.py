"""Animation features on NumPy arrays: the ground-projected root (:mod:`.root`),
trajectories over a time window in root space (:mod:`.trajectory`), contacts and local
phases (:mod:`.contacts`), the one normaliser (:mod:`.normalisation`) and the
training-window dataset pipeline (:mod:`.dataset`)."""
from kinema.features.contacts import contacts as contact_labels
from kinema.features.contacts import local_phases, onsets, phase_vectors
from kinema.features.dataset import FeatureDataset, FeatureSpec, Normalisation, build_dataset
from kinema.features.normalisation import Normaliser
from kinema.features.root import (
                                  Root,
                                  RootConfig,
                                  compute_root,
                                  from_root_space,
                                  rotations_to_root_space,
                                  to_root_space,
                                  vectors_from_root_space,
                                  vectors_to_root_space,
)
from kinema.features.trajectory import JointTrajectory, RootTrajectory, TimeSeries, joint_trajectory, root_trajectory

__all__ = ["Root", "RootConfig", "compute_root", "to_root_space", "from_root_space", "vectors_to_root_space",
           "vectors_from_root_space", "rotations_to_root_space", "TimeSeries", "RootTrajectory",
           "JointTrajectory", "root_trajectory", "joint_trajectory", "contact_labels", "local_phases", "onsets",
           "phase_vectors", "FeatureSpec", "FeatureDataset", "Normalisation", "Normaliser", "build_dataset"]
