-- 0004: the bytes of artifacts, in the database so that every daemon on it
-- reads them. Each artifact's bytes are chunks of 1 MiB (the last holds the
-- rest; an empty artifact has none), numbered from 0, written in the
-- transaction that inserts the artifact's row, so a committed artifact has
-- all its chunks and a rolled-back one leaves none.
CREATE TABLE artifact_chunks (
	artifact TEXT COLLATE "C" NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,
	seq      INTEGER NOT NULL CHECK (seq >= 0),
	data     BYTEA   NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 1048576),
	PRIMARY KEY (artifact, seq)
);
