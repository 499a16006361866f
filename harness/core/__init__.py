"""What every part of the package stands on: where the on-disk caches live, the errors a user can act on, files
written whole or not at all, task options as typed dataclasses, the run record, and the keys of the results files."""
