"""Training-side losses for trained variants (LongCE, LSM regulariser)."""

from harness.train.losses import longce_loss, lsm_regularized_loss, token_nll

__all__ = ["longce_loss", "lsm_regularized_loss", "token_nll"]
