-- 0005: the document of each configuration generation, by its canonical
-- hash, so that every daemon sharing the store can load a generation
-- another daemon committed (docs/storage.md, "Configuration"). It holds
-- secret references as written, never a secret's value; the generation's
-- own row keeps only the redacted form.
CREATE TABLE config_documents (
	hash     TEXT COLLATE "C" PRIMARY KEY,
	document TEXT COLLATE "C" NOT NULL
);
