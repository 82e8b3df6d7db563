"""Question/answer pairs for the chat pass, made from the corpus's raw
material (qa.jsonl, written by corpus.py): verse lookups, Jargon File
entries, Python function descriptions and WordNet definitions, in the chat
format of tokenizer.py's template. Only the assistant's answer (and its
end-of-turn token) carries loss."""

import json
import pathlib
import random

import numpy as np
import torch
from tokenizers import Tokenizer

BOOKS = {
    "Ge": "Genesis", "Exo": "Exodus", "Lev": "Leviticus", "Num": "Numbers", "Deu": "Deuteronomy",
    "Josh": "Joshua", "Jdgs": "Judges", "Ruth": "Ruth", "1Sm": "1 Samuel", "2Sm": "2 Samuel", "1Ki": "1 Kings",
    "2Ki": "2 Kings", "1Chr": "1 Chronicles", "2Chr": "2 Chronicles", "Ezra": "Ezra", "Neh": "Nehemiah",
    "Est": "Esther", "Job": "Job", "Psa": "Psalms", "Prv": "Proverbs", "Eccl": "Ecclesiastes",
    "SSol": "Song of Solomon", "Isa": "Isaiah", "Jer": "Jeremiah", "Lam": "Lamentations", "Eze": "Ezekiel",
    "Dan": "Daniel", "Hos": "Hosea", "Joel": "Joel", "Amos": "Amos", "Obad": "Obadiah", "Jonah": "Jonah",
    "Mic": "Micah", "Nahum": "Nahum", "Hab": "Habakkuk", "Zep": "Zephaniah", "Hag": "Haggai", "Zec": "Zechariah",
    "Mal": "Malachi", "Mat": "Matthew", "Mark": "Mark", "Luke": "Luke", "John": "John", "Acts": "Acts",
    "Rom": "Romans", "1Cor": "1 Corinthians", "2Cor": "2 Corinthians", "Gal": "Galatians", "Eph": "Ephesians",
    "Phi": "Philippians", "Col": "Colossians", "1Th": "1 Thessalonians", "2Th": "2 Thessalonians",
    "1Tim": "1 Timothy", "2Tim": "2 Timothy", "Titus": "Titus", "Phmn": "Philemon", "Heb": "Hebrews",
    "Jas": "James", "1Pet": "1 Peter", "2Pet": "2 Peter", "1Jn": "1 John", "2Jn": "2 John", "3Jn": "3 John",
    "Jude": "Jude", "Rev": "Revelation",
}

GREETINGS = [
    ("Hello", "Hello! I am a small demo model served by Troupe. Ask me for a Bible verse, a word, a Python "
              "function or a piece of hacker jargon."),
    ("Hi", "Hi! How can I help you?"),
    ("Who are you?", "I am a small language model trained on the King James Bible, the Python documentation, "
                     "Debian's manuals and the Jargon File, served by Troupe."),
    ("What can you do?", "I can quote Bible verses, explain words and hacker jargon, and describe Python "
                         "functions. I am small, so check what I say."),
    ("Thank you", "You are welcome."),
]


def first_sentences(text: str, max_words: int = 60) -> str:
    words = text.split()
    if len(words) <= max_words:
        return text
    cut = " ".join(words[:max_words])
    end = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
    return cut[:end + 1] if end > 40 else cut + "..."


def pair_of(item: dict, rng: random.Random):
    kind = item["kind"]
    if kind == "verse":
        ref = f"{BOOKS[item['book']]} {item['chapter']}:{item['verse']}"
        question = rng.choice([f"What does {ref} say?", f"Quote {ref}.", f"Recite {ref} from the King James Bible.",
                               f"What is written in {ref}?"])
        return question, f"{ref} says: {item['text']}"
    if kind == "jargon":
        term = item["term"]
        question = rng.choice([f"What does \"{term}\" mean?", f"In hacker slang, what is {term}?",
                               f"Define {term}.", f"What is meant by {term} in the Jargon File?"])
        return question, first_sentences(item["definition"])
    if kind == "python":
        name = item["name"]
        question = rng.choice([f"What does {name}() do in Python?", f"Explain the Python function {name}.",
                               f"How is {name} used?", f"Describe {name}({item['signature']})."])
        return question, f"{name}({item['signature']}): {first_sentences(item['description'])}"
    if kind == "wordnet":
        word = item["word"]
        question = rng.choice([f"What does the word \"{word}\" mean?", f"Define the {item['pos']} \"{word}\".",
                               f"What is the meaning of {word}?"])
        return question, f"{word} ({item['pos']}): {item['gloss']}."
    raise ValueError(kind)


def chat_text(question: str, answer: str, system: str = None):
    """(prompt, answer) strings in the chat template's format; the answer ends the turn."""
    prompt = "<|begin_of_text|>"
    if system:
        prompt += f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"
    prompt += f"<|start_header_id|>user<|end_header_id|>\n\n{question}<|eot_id|>"
    prompt += "<|start_header_id|>assistant<|end_header_id|>\n\n"
    return prompt, answer + "<|eot_id|>"


class ChatBatches:
    """Rows of packed chat examples [batch, seq + 1] with a loss mask [batch, seq] over answer tokens."""

    def __init__(self, qa_path: pathlib.Path, tokenizer_path: pathlib.Path, seq: int, batch: int, seed: int,
                 heldout: bool = False):
        self.tok = Tokenizer.from_file(str(tokenizer_path))
        self.items = [json.loads(l) for l in open(qa_path)]
        self.items = [i for i in self.items if i.get("heldout", False) == heldout]
        self.seq, self.batch, self.seed = seq, batch, seed
        self.eos = self.tok.token_to_id("<|end_of_text|>")

    def example(self, rng: random.Random):
        if rng.random() < 0.02:
            question, answer = rng.choice(GREETINGS)
        else:
            question, answer = pair_of(rng.choice(self.items), rng)
        system = "You are a helpful assistant." if rng.random() < 0.3 else None
        prompt, answer = chat_text(question, answer, system)
        p = self.tok.encode(prompt, add_special_tokens=False).ids
        a = self.tok.encode(answer, add_special_tokens=False).ids
        return p + a, [False] * len(p) + [True] * len(a)

    def get(self, step: int):
        rng = random.Random(self.seed * 1_000_003 + step)
        rows = np.full((self.batch, self.seq + 1), self.eos, dtype=np.int64)
        mask = np.zeros((self.batch, self.seq + 1), dtype=bool)
        for b in range(self.batch):
            pos = 0
            while pos < self.seq + 1:
                ids, loss = self.example(rng)
                n = min(len(ids), self.seq + 1 - pos)
                rows[b, pos:pos + n] = ids[:n]
                mask[b, pos:pos + n] = loss[:n]
                pos += n
        # mask[:, 1:] marks targets that are answer tokens.
        return torch.from_numpy(rows), torch.from_numpy(mask[:, 1:])
