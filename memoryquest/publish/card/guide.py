"""The card's sections for whoever uses the dataset: what a system under test may read, how
to load it, the schema and the ground-truth chain, the licence and how to cite it."""

from __future__ import annotations

from memoryquest.contracts import READABLE_TABLES, SCHEMA_VERSION
from memoryquest.publish.arrow import describe_columns
from memoryquest.publish.card.format import markdown_table
from memoryquest.publish.card.front_matter import DEFAULT_CONFIG, data_files
from memoryquest.publish.card.inputs import CardInputs

PGR_PAPER_BIBTEX = """@misc{chopra2026thinkingahead,
  title         = {Thinking Ahead: Prospection-Guided Retrieval of Memory with Language Models},
  author        = {Chopra, Harshita and Chintalapudi, Krishna and Nath, Suman and White, Ryen and Shah, Chirag},
  year          = {2026},
  eprint        = {2605.14177},
  archivePrefix = {arXiv},
  url           = {https://arxiv.org/abs/2605.14177}
}"""

PERSONALENS_BIBTEX = """@inproceedings{zhao2025personalens,
  title     = {PersonaLens: A Benchmark for Personalization Evaluation in Conversational {AI} Assistants},
  author    = {Zhao, Zheng and Vania, Clara and Kayal, Subhradeep and Khan, Naila and Cohen, Shay B. and Yilmaz, Emine},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2025},
  year      = {2025},
  url       = {https://github.com/amazon-science/PersonaLens}
}"""

CONFIG_DESCRIPTIONS: dict[str, str] = {
    "personas": "one row per user: PersonaLens demographics, interests, affinities, interaction summaries and tasks",
    "queries": "the in-situ planning requests as a system under test gets them: id, user, date, text",
    "query_labels": "each query's answer key: its 3–5 required references, per-reference cosine, γ, the embedder, the query's domain",
    "timelines": "per query, the dated events that embed each reference exactly once, plus filler events",
    "history": "each user's conversations in date order: session id, date, turns as a list of {role, content}; no label",
    "session_labels": "per session: the query and timeline event it was expanded from, its domain and place in the history, the reference it carries and the turns and spans that say it",
    "facts": "the final memory store with provenance, revisions (replayable to any date) and merge history; no credited reference",
    "fact_labels": "per fact, the references credited to it, as a whole and per revision",
    "validation": "per query × retrieval method × judge: retrieved facts, per-reference judgements, Recall, RecallExact, prospection trace",
    "rejected": "every generated candidate that did not make it into the dataset, with the reason and the raw JSON",
}


def readable_section(inputs: CardInputs) -> list[str]:
    readable = [config for config in inputs.schemas if config in READABLE_TABLES]
    scoring = [config for config in inputs.schemas if config not in READABLE_TABLES]
    return [
        "## What a system under test may read",
        "",
        "A memory system under test reads "
        + ", ".join(f"`{c}`" for c in readable)
        + ": each user's conversation history (persona, session id, date, turns, in date order),",
        "the requests (query id, user, date, text) and, for a retrieval method over extracted memory, the",
        "facts. None of them says which sessions belong to which query, which turn says a reference or which",
        "fact is credited with one; session ids are opaque hashes that carry no order by query.",
        "",
        "Ground truth and generation records, for scoring only: "
        + ", ".join(f"`{c}`" for c in scoring)
        + ". A system that reads them is no longer being tested; nor is one that reads the",
        "`explorer/` folder, which shows every session and fact joined with its labels.",
        "`memoryquest.publish.load_readable(root)` reads only the configs a system under test may read.",
        "",
    ]


def loading_section(inputs: CardInputs) -> list[str]:
    config = (
        DEFAULT_CONFIG
        if DEFAULT_CONFIG in data_files(inputs.row_counts)
        else next(iter(data_files(inputs.row_counts)), DEFAULT_CONFIG)
    )
    return [
        "## Loading",
        "",
        "`root` is the folder that holds this README (or the dataset's Hub id for `datasets`).",
        "",
        "```python",
        'root = "path/to/this/dataset"',
        "",
        "# Hugging Face datasets: through the configs above ...",
        "from datasets import load_dataset",
        f'{config} = load_dataset(root, "{config}")',
        "# ... or straight from the Parquet files of one config",
        f'{config} = load_dataset("parquet", data_dir=f"{{root}}/data/{config}")',
        "",
        "# pandas",
        "import pandas as pd",
        f'train = pd.read_parquet(f"{{root}}/data/{config}/train-00000-of-00001.parquet")',
        "",
        "# DuckDB (all splits of a config at once)",
        "import duckdb",
        f"duckdb.sql(f\"SELECT * FROM read_parquet('{{root}}/data/{config}/*.parquet')\").df()",
        "",
        "# polars",
        "import polars as pl",
        f'df = pl.read_parquet(f"{{root}}/data/{config}/*.parquet")',
        "",
        "# what a system under test may read: history, queries, facts (no labels config is opened)",
        "from memoryquest.publish import load_readable, load_published",
        "readable = load_readable(root)",
        "# every config, the history joined with its labels (for `memoryquest pgr run` / `validate`)",
        "dataset = load_published(root)",
        "```",
        "",
        "A JSON Lines mirror of every split is in `jsonl/<config>/<split>.jsonl`.",
        "",
    ]


def schema_section(inputs: CardInputs) -> list[str]:
    lines = [
        "## Schema",
        "",
        f"Every row carries `schema_version` (currently `{SCHEMA_VERSION}`); ids are opaque, stable strings",
        "with a type prefix (`p_` persona, `q_` query, `r_` reference, `e_` event, `s_` session, `f_` fact,",
        "`x_` rejected, `v_` validation result); dates are ISO-8601; nested values are Arrow lists and structs.",
        "`rejected.payload_json` is deliberately raw JSON text: it holds whatever was generated, valid or not.",
        "",
    ]
    for config, schema in inputs.schemas.items():
        rows_total = sum(inputs.row_counts.get(config, {}).values())
        description = CONFIG_DESCRIPTIONS.get(config, "")
        lines += [
            f"<details><summary><code>{config}</code> — {description} ({rows_total} rows)</summary>",
            "",
        ]
        lines += markdown_table(
            ["column", "type", "nullable", "description"],
            [
                (f"`{path}`", f"`{kind}`", "yes" if nullable else "no", desc)
                for path, kind, nullable, desc in describe_columns(schema)
            ],
        )
        lines += ["", "</details>", ""]
    lines += [
        "## Ground truth",
        "",
        "Each query's answer depends on its required references, kept as an explicit chain so recall can be",
        "scored at several levels:",
        "",
        "```",
        "query_labels.references[].reference_id",
        "  -> timelines.events[] (kind = reference, reference_id)  .event_id",
        "  -> session_labels (event_id, reference_id)               .session_id  (a `history` row)",
        "  -> session_labels.reference_turn_indices, reference_spans  (turns and sentences that convey it)",
        "  -> fact_labels (source_reference_ids; per revision too)  .fid         (a `facts` row)",
        "```",
        "",
        "Each labels config joins its readable config on the id: `queries` and `query_labels` on `query_id`,",
        "`history` and `session_labels` on `session_id`, `facts` and `fact_labels` on `fid`",
        "(`fact_labels.revisions` lists the same revisions, in the same order, as `facts.revisions`).",
        "A user's sessions across all queries form one chronological history (`session_labels.position`).",
        "`facts.revisions` replays the memory store to any date: a fact is visible on a query date when its",
        "first revision is on or before that date and it was not retired (`retired_on`) by then; its content",
        "is the latest revision dated on or before the query date, and the references it is credited with then",
        "are that revision's `fact_labels.revisions[].source_reference_ids`. `validation.judgements[].supporting_fids`",
        "point at the retrieved facts that carried each reference.",
        "",
    ]
    return lines


def licence_section(inputs: CardInputs) -> list[str]:
    lines = ["## Licence and attribution", ""]
    if inputs.has_personalens:
        lines += [
            "The personas, and therefore every generated record, derive from **PersonaLens**",
            "(Zhao et al., *PersonaLens: A Benchmark for Personalization Evaluation in Conversational AI",
            "Assistants*, Findings of ACL 2025; data from",
            "[amazon-science/PersonaLens](https://github.com/amazon-science/PersonaLens)), licensed",
            "[CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/). This dataset is released under the",
            "same licence: attribution required, **non-commercial use only**.",
        ]
    else:
        lines += [
            "Released under [CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/):",
            "attribution required, non-commercial use only.",
        ]
    if inputs.licence_file:
        lines.append(f"The full licence text is in `{inputs.licence_file}`.")
    lines += [
        "",
        "MemoryQuest and Prospection-Guided Retrieval are described in Chopra et al., *Thinking Ahead:",
        "Prospection-Guided Retrieval of Memory with Language Models* (arXiv 2605.14177).",
        "",
        "## Citation",
        "",
        "```bibtex",
        PGR_PAPER_BIBTEX,
        "",
        PERSONALENS_BIBTEX,
        "```",
        "",
    ]
    return lines
