"""What every part stands on: cache locations, user errors, atomic files, typed options, run record, results keys."""
