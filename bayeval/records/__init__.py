"""What a run leaves on disk: journals (:mod:`~bayeval.records.journal`), the checks that find
any changed or foreign line in them (:mod:`~bayeval.records.journal_check`), and the files
bayeval writes whole or not at all (:mod:`~bayeval.records.files`)."""
