"""A generated set of long two-person conversations with evidence-annotated questions.

Shaped like a held-out long-conversation set: each *pair* is two named speakers
(full names and nicknames: "Melanie" is also "Mel") who talk in 20+ dated
sessions spread over months, 15-40 turns each. Both speakers are people, so
both write ``role="user"`` message events with their first name as ``author``;
a pair is one (app, user) scope of the store (``user_id`` = the pair id).

What the conversations hold, per speaker:

- stable facts said once: hometown, a sibling (named), a hobby, details (a car,
  a book, a birthday gift, a restaurant, a class, an allergy);
- facts that change, with the session they change in: a move from city A to B
  and/or a new job (the later statement does not repeat the old value, so
  "before" questions need the older turn);
- two pet adoptions in different sessions, 2-3 trips, two outings with the
  sibling, and dated events told with a relative expression ("we went hiking at
  Lake Tahoe last Saturday") whose date follows from the session date;
- distractors: chit-chat, recurring mentions of the same people, places, pets
  and workplaces that state nothing new, and other people's facts ("my coworker
  just adopted a parrot").

Questions (``questions.jsonl``), kinds:

- ``single_session``: a fact stated in one turn;
- ``multi_session``: needs turns from two or more sessions (pets now, trips,
  outings with the sibling);
- ``temporal``: "when did X ...": the answer is a date derived from the session
  date and the turn's relative expression;
- ``open_domain``: about the speakers' lives, asked in other words (work,
  siblings, roots, free time);
- ``changed_now`` / ``changed_before``: the current value of a changed fact
  (``stale`` names the superseded turn) and the value before the change.

Every question names its ``evidence``: the turn (``event_id``, ``session_id``),
the sentence of it that states the fact (``key``, a substring of the turn's
text) and the words that must appear with it (``must``: the value).

Deterministic: every random choice comes from ``random.Random`` seeded with a
string per pair, so pair N is the same whatever the number of pairs.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from mnemoray.backfill.archive import write_archive
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session

# Bump when the generated content changes: it is part of the cache key.
GENERATOR_VERSION = 1
DEFAULT_APP = "longconv"
START = datetime(2023, 1, 9, tzinfo=timezone.utc)
KINDS = (
    "single_session",
    "multi_session",
    "temporal",
    "open_domain",
    "changed_now",
    "changed_before",
)

# (full name, nickname, pronoun set)
SPEAKERS = (
    ("Caroline", "Caro", "f"),
    ("Melanie", "Mel", "f"),
    ("Katherine", "Kate", "f"),
    ("Samantha", "Sam", "f"),
    ("Elizabeth", "Liz", "f"),
    ("Rebecca", "Becca", "f"),
    ("Jessica", "Jess", "f"),
    ("Victoria", "Tori", "f"),
    ("Abigail", "Abby", "f"),
    ("Josephine", "Jo", "f"),
    ("Jonathan", "Jon", "m"),
    ("Alexander", "Alex", "m"),
    ("Benjamin", "Ben", "m"),
    ("Nicholas", "Nick", "m"),
    ("Timothy", "Tim", "m"),
    ("Gabriel", "Gabe", "m"),
    ("Daniel", "Dan", "m"),
    ("Matthew", "Matt", "m"),
    ("Christopher", "Chris", "m"),
    ("Zachary", "Zach", "m"),
)
PRONOUNS = {"f": ("she", "her", "her"), "m": ("he", "him", "his")}  # subj, obj, poss
SIB_F = ("Hannah", "Greta", "Ingrid", "Priya", "Lucia", "Nadia", "Esme", "Freya", "Talia", "Imogen")
SIB_M = ("Leo", "Mateo", "Jonas", "Ravi", "Elliot", "Tomas", "Hugo", "Felix", "Omar", "Kenji")
TOWNS = (
    "Asheville",
    "Duluth",
    "Galway",
    "Bergen",
    "Tucson",
    "Halifax",
    "Boise",
    "Savannah",
    "Ithaca",
    "Eugene",
    "Aarhus",
    "Bath",
)
CITIES = (
    "Berlin",
    "Portland",
    "Denver",
    "Chicago",
    "Toronto",
    "Austin",
    "Melbourne",
    "Seattle",
    "Edinburgh",
    "Vancouver",
    "Boston",
    "Madrid",
    "Dublin",
    "Minneapolis",
)
JOBS = (
    ("nurse", "St. Mary's Hospital"),
    ("graphic designer", "Lumen Studio"),
    ("software engineer", "Brightwave"),
    ("high school teacher", "Westfield High"),
    ("pastry chef", "Cafe Amara"),
    ("physiotherapist", "Motion Clinic"),
    ("data analyst", "Northwind Logistics"),
    ("librarian", "the Oakridge Library"),
    ("architect", "Halden Architects"),
    ("veterinary technician", "Pawsitive Vets"),
    ("social worker", "the Harbor Youth Center"),
    ("accountant", "Greer Partners"),
)
SPECIES = (
    "golden retriever puppy",
    "tabby cat",
    "rescue greyhound",
    "bearded dragon",
    "corgi",
    "cockatiel",
    "black cat",
    "lop-eared rabbit",
    "beagle",
    "border collie",
)
PET_NAMES = (
    "Biscuit",
    "Mango",
    "Pepper",
    "Luna",
    "Ziggy",
    "Olive",
    "Noodle",
    "Archie",
    "Pixel",
    "Mochi",
    "Rufus",
    "Clementine",
    "Bowie",
    "Juniper",
    "Waffles",
    "Kiko",
)
# (hobby, the word a hit must hold, statement)
HOBBIES = (
    (
        "pottery",
        "pottery",
        "I've really gotten into pottery, I throw bowls at the studio every Sunday.",
    ),
    (
        "rock climbing",
        "climbing",
        "Rock climbing has become my thing, I go to the bouldering gym three times a week.",
    ),
    (
        "watercolor painting",
        "watercolor",
        "I paint watercolor landscapes most evenings, it keeps me sane.",
    ),
    (
        "playing the violin",
        "violin",
        "I picked the violin back up and practice scales every night.",
    ),
    ("gardening", "garden", "My balcony garden is my happy place, I grow tomatoes and basil."),
    ("trail running", "running", "Trail running is how I unwind, I do long runs every weekend."),
    ("baking sourdough", "sourdough", "I bake sourdough every weekend, my starter is named Gus."),
    (
        "bird watching",
        "bird",
        "I go bird watching at dawn with my binoculars, I logged forty species so far.",
    ),
    ("knitting", "knit", "I knit constantly, I'm halfway through a cable sweater."),
    ("photography", "photography", "Street photography is my hobby, I shoot film on an old Leica."),
)
HOBBY_QUESTIONS = (
    "How does {name} like to spend {poss} free time?",
    "What does {name} do to relax?",
    "What is {name} into these days?",
)
TRIPS = (
    "Iceland",
    "Kyoto",
    "the Amalfi Coast",
    "Yellowstone",
    "Banff",
    "Marrakech",
    "Cape Town",
    "the Scottish Highlands",
    "Crete",
    "Patagonia",
    "Vienna",
    "Hanoi",
)
TRIP_LINES = (
    "I just got back from {place}, it was incredible.",
    "We spent ten days in {place} and I already miss it.",
    "The trip to {place} was the best vacation I've had in years.",
    "Traveling around {place} for a week was a dream.",
)
# Stable facts, several wordings each (slots: place, rel, sib, city, title, work).
HOMETOWN_LINES = (
    "I grew up in {place}, a tiny place where everyone knew everyone.",
    "Back in {place}, where I was raised, winters were brutal.",
    "I'm from {place} originally, my parents still live there.",
)
SIBLING_LINES = (
    "My {rel} {sib} is coming to stay with me for a few days.",
    "My little {rel} {sib} just started college, I'm so proud.",
    "My older {rel} {sib} and I talk on the phone every Sunday.",
)
CITY_LINES = (
    "I love living in {city}, our apartment is small but cozy.",
    "Life in {city} suits me, I can walk everywhere from our place.",
    "Our neighborhood in {city} has the best bakeries.",
)
JOB_LINES = (
    "I work as {title} at {work}, long days but I love it.",
    "Being {title} at {work} is exhausting but rewarding.",
    "My shift at {work} ran late again, such is life as {title}.",
)
PET_LINES = (
    "We adopted a {species} named {pet} {when}!",
    "We got a pet {when}, a {species} named {pet}!",
    "Meet the newest family member: a {species} named {pet}, we adopted {pet} {when}.",
)
PET2_LINES = (
    "We brought home a {species} called {pet}, so now the house is even busier.",
    "We added another pet to the family, a {species} named {pet}.",
    "Say hello to {pet}, our new {species}!",
)
OPEN_QUESTIONS = {
    "hometown": (
        "Where are {name}'s roots?",
        "Which town is {name} from originally?",
        "Where did {name} spend {poss} childhood?",
    ),
    "sibling": (
        "Does {name} have any siblings?",
        "Who is {name}'s {rel}?",
        "Tell me about {name}'s family.",
    ),
    "job": (
        "What does {name} do for a living?",
        "What is {name}'s profession?",
        "Where does {name} work?",
    ),
}
# Later mentions of something already told: they cite other turns.
ECHOES = (
    "I still think about {x} all the time.",
    "We should go back to {x} someday.",
    "Remember when I told you about {x}? Good times.",
    "{X} keeps coming up lately.",
    "I was just telling someone about {x}.",
)
ECHO_REPLIES = (
    "Same, it sounded like such a highlight.",
    "Ha, you talk about it so much!",
    "You should totally go back.",
    "I remember, you were glowing.",
)
ECHO_REACTIONS = (
    "{X}? That sounds amazing!",
    "Ooh, {x}! I'm so jealous.",
    "{X}, wow. Send pictures!",
)
# dated events: (statement with {place} and {when}, question phrases, places)
EVENTS = (
    (
        "We went hiking at {place} {when}, the views were unreal.",
        ("go hiking at {place}", "visit {place}"),
        ("Lake Tahoe", "Crater Lake", "Lake Louise", "Mirror Lake", "Lake Bled"),
    ),
    (
        "I ran a charity 5K for {place} {when} and finished in under thirty minutes.",
        ("run the charity 5K for {place}", "do a charity run"),
        ("the children's hospital", "the animal shelter", "the cancer center"),
    ),
    (
        "I saw {place} in concert {when}, I cried during the encore.",
        ("see {place} in concert", "see {place} live"),
        ("Florence and the Machine", "Bon Iver", "The Lumineers", "Hozier", "Phoebe Bridgers"),
    ),
    (
        "I went to my cousin's wedding in {place} {when}, the ceremony was on a cliff.",
        ("go to a cousin's wedding in {place}", "travel to {place} for a wedding"),
        ("Santorini", "Napa", "Tuscany", "Maui"),
    ),
    (
        "I volunteered at {place} {when}, we sorted donations all day.",
        ("volunteer at {place}", "help out at {place}"),
        ("the food bank", "the community garden", "the soup kitchen"),
    ),
    (
        "We went camping at {place} {when} and saw a bear from far away.",
        ("go camping at {place}", "sleep under the stars at {place}"),
        ("Big Sur", "Zion", "Joshua Tree", "Glacier Park"),
    ),
    (
        "I gave a talk at {place} {when}, my hands were shaking the whole time.",
        ("give a talk at {place}", "speak in public at {place}"),
        ("the city library", "a design meetup", "the local college"),
    ),
)
# relative expression -> days before the session date (None: special rule)
WHENS = (
    ("yesterday", 1),
    ("last Saturday", None),
    ("two weeks ago", 14),
    ("last weekend", None),
    ("three days ago", 3),
    ("last month", None),
)
SIB_OUTINGS = (
    "went kayaking",
    "took a cooking class",
    "went to a pottery class",
    "went to a jazz festival",
    "did an escape room",
    "went ice skating",
    "drove up the coast",
    "tried a salsa class",
)
# kind -> (statement, questions (one literal, others in other words), values)
DETAILS = {
    "car": (
        "I finally bought a car, a {x}!",
        (
            "What car did {name} buy?",
            "What does {name} drive these days?",
            "Which vehicle did {name} get?",
        ),
        (
            "red Mazda 3",
            "silver Subaru Outback",
            "green Honda Fit",
            "blue Volvo XC40",
            "white Toyota Prius",
        ),
    ),
    "book": (
        "I just finished reading {x} and I couldn't put it down.",
        ("Which book did {name} finish recently?", "What novel was {name} raving about?"),
        ("Pachinko", "The Overstory", "Circe", "Educated", "Project Hail Mary"),
    ),
    "gift": (
        "My {rel} {sib} got me {x} for my birthday.",
        (
            "What did {name}'s {rel} give {obj} for {poss} birthday?",
            "Which present did {name} get from {poss} {rel}?",
        ),
        (
            "a vintage record player",
            "a hand-painted teapot",
            "a telescope",
            "an espresso machine",
            "a silk scarf",
        ),
    ),
    "restaurant": (
        "If you ever crave ramen, {x} downtown is the best place.",
        (
            "Which restaurant does {name} recommend for ramen?",
            "Where does {name} say the best noodle soup is?",
        ),
        ("Menya Kobo", "Ramen Haru", "Tonkotsu Bar", "Noodle Temple"),
    ),
    "class": (
        "I signed up for a {x} class on Thursday evenings.",
        (
            "What class did {name} sign up for?",
            "What is {name} learning on weeknights?",
            "Which course is {name} taking?",
        ),
        ("Spanish", "ceramics", "improv", "woodworking", "first aid"),
    ),
    "allergy": (
        "I found out I'm allergic to {x}, which explains a lot.",
        (
            "What is {name} allergic to?",
            "What gives {name} a reaction?",
            "What does {name} have to avoid for health reasons?",
        ),
        ("shellfish", "peanuts", "cats", "pollen"),
    ),
}
SHOWS = (
    "Ted Lasso",
    "The Bear",
    "Severance",
    "Succession",
    "Abbott Elementary",
    "The Great British Bake Off",
    "Only Murders in the Building",
)
FOODS = (
    "lasagna",
    "pad thai",
    "shakshuka",
    "tacos",
    "mushroom risotto",
    "banana bread",
    "curry",
    "dumplings",
)
WEATHER = ("rainy", "freezing", "gorgeous", "humid", "windy", "grey")
WHO = ("coworker", "neighbour", "cousin", "friend Rosa", "boss", "roommate")
GREETINGS = (
    "Hey {other}! How have you been?",
    "Hi {other}, long time no talk!",
    "{other}! Good to hear from you.",
    "Hey you, how was your week?",
    "Morning {other}! Got a minute to chat?",
)
GREET_REPLIES = (
    "Hey! Pretty good, busy as always. You?",
    "Hi! I'm doing okay, a bit tired.",
    "So good to hear from you! Things are hectic but fine.",
    "Hey hey! Just made some tea, perfect timing.",
)
CLOSINGS = (
    "I should get going, talk soon!",
    "Okay, I have to run. Miss you!",
    "Let's catch up again soon, take care!",
    "Gotta go make dinner, bye for now!",
)
CLOSING_REPLIES = (
    "Bye {other}, talk soon!",
    "Take care, {other}!",
    "Love you, bye!",
    "Talk soon, say hi to everyone!",
)
REACTIONS = (
    "That's wonderful, {other}!",
    "No way! I love that for you.",
    "I'm so happy for you, {other}.",
    "Wow, tell me everything!",
    "Oh that sounds amazing.",
    "Aww, that's so sweet.",
    "Haha, that is so you.",
    "Good for you, {other}, seriously.",
    "That must have felt great.",
)
# Second sentences that make turns as long as people's, stating nothing new.
TAILS = (
    "Life has been such a whirlwind lately, honestly.",
    "I keep telling myself to slow down a little and enjoy things.",
    "Anyway, it feels good to finally say it out loud to someone.",
    "The whole week went by in a blur of errands and emails.",
    "I was going to text you about it but it felt like a call kind of thing.",
    "It's funny how things work out when you stop worrying so much.",
    "My head is still spinning a bit from all of it, to be honest.",
    "I'll tell you the longer version over coffee next time.",
    "Everyone keeps asking me about it and I never know where to start.",
    "Sorry if I'm rambling, it has been one of those days.",
    "I should really write these things down in a journal or something.",
    "Part of me still can't quite believe it, you know?",
    "It was one of those moments you want to bottle up and keep.",
    "Anyway, how are things on your end, any news?",
    "I had to sit down with a cup of tea afterwards just to process it.",
)
LEADS = ("", "", "Guess what! ", "Oh, big news! ", "So yeah. ", "Oh, I forgot to tell you. ")
FILLERS = (
    ("I've been binge-watching {show} lately.", "Ooh, I keep hearing about {show}."),
    ("The weather in {city} has been {weather} all week.", "Ugh, same vibe here honestly."),
    ("{sib} says hi, by the way.", "Tell {sib} I said hi back!"),
    ("Work at {work} has been hectic this month.", "Hang in there, it'll calm down."),
    ("I made {food} last night, it turned out great.", "Now I'm hungry, thanks a lot."),
    ("I didn't sleep well at all last night.", "Oh no, coffee is your friend today."),
    ("Did you catch the new season of {show}?", "Not yet, no spoilers please!"),
    ("My {who} just adopted a {species}.", "Cute! Everyone is getting pets lately."),
    ("My {who} moved to {city2} last month.", "That's a big move, good for them."),
    ("My {who} started working as {job2}.", "Interesting career choice!"),
    ("{pet} has been extra clingy lately.", "Aww, give {pet} a hug from me."),
    ("I want to do more {hobby} but time keeps slipping away.", "I know that feeling."),
    ("{sib} and I had coffee at the usual place.", "That place has the best muffins."),
    ("It's been so quiet around {city} lately.", "Quiet can be nice sometimes."),
    ("Anyway, enough about me. What's new with you?", "Oh, not much, the usual chaos."),
    ("I'm thinking about repainting the living room.", "Go bold! Maybe a deep green."),
    ("Have you tried that {food} place near the station?", "Not yet, is it good?"),
    ("I keep meaning to call my mom more often.", "Same here, I'm terrible at it."),
    ("Traffic this morning was a nightmare.", "Ugh, I hate rush hour."),
    (
        "I'm reading a mystery novel before bed, no idea who did it yet.",
        "Those are the best, no spoilers for yourself!",
    ),
    ("Our upstairs neighbours are so loud on weekends.", "Maybe bake them cookies and ask?"),
    ("I finally cleaned out my closet, so satisfying.", "I need to do that so badly."),
    ("Do you have any podcast recommendations?", "Try a true crime one, they're addictive."),
    ("I tried meditating for ten minutes a day this week.", "How did it go?"),
    ("My phone screen cracked again, classic me.", "Oh no! Get a sturdier case this time."),
    ("{sib} sent me the funniest meme this morning.", "Haha, {sib} has the best humor."),
    ("Some days at {work} feel like they last forever.", "I hear you, hang in there."),
    ("I've been drinking way too much coffee.", "Same, it's a problem."),
    ("The farmers market had amazing peaches this weekend.", "Ooh, I love peach season."),
    ("I think I'm finally getting better at {hobby}.", "Practice pays off!"),
    ("We should plan a trip together sometime.", "Yes! Let's actually do it this time."),
    ("I burned the toast this morning, what a start.", "Haha, rough morning."),
)


@dataclass(frozen=True)
class LongConvConfig:
    pairs: int = 10
    sessions: int = 24
    min_turns: int = 15
    max_turns: int = 40
    seed: int = 7
    app_name: str = DEFAULT_APP

    def fingerprint(self) -> str:
        raw = json.dumps({"v": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:12]


@dataclass
class Person:
    name: str
    alias: str
    gender: str
    rel: str  # "sister" | "brother"
    sib: str
    hometown: str
    hobby: tuple[str, str, str]
    cities: list[str]  # [old] or [old, new]
    jobs: list[tuple[str, str]]  # [old] or [old, new]
    pets: list[tuple[str, str]]  # (species, name), adopted in order
    trips: list[str]
    events: list[tuple[str, str, str]]  # (statement, question phrase, place)
    outings: list[str]
    details: list[tuple[str, str]]  # (detail kind, value)

    def pron(self, i: int) -> str:
        return PRONOUNS[self.gender][i]


@dataclass
class Plant:
    """A statement one speaker makes in one session: ``text`` is the whole turn,
    ``key`` the sentence stating the fact, ``must`` the value words."""

    speaker: int
    tag: str
    key: str
    must: tuple[str, ...]
    lead: str = ""
    when: str = ""  # relative expression, for dated statements
    echo: str = ""  # how later turns refer back to it ("" : they do not)
    event_id: str = ""
    session_id: str = ""
    date: str = ""  # the session date, YYYY-MM-DD

    @property
    def text(self) -> str:
        return self.lead + self.key


@dataclass
class Dataset:
    config: LongConvConfig
    sessions: list[Session]
    questions: list[dict[str, Any]]

    def stats(self) -> dict[str, Any]:
        turns = [len(s.events) for s in self.sessions]
        return {
            "pairs": self.config.pairs,
            "sessions": len(self.sessions),
            "turns": sum(turns),
            "turns_per_session": [min(turns), max(turns)],
            "questions": len(self.questions),
            "questions_by_kind": {
                k: v for k in KINDS if (v := Counter(q["kind"] for q in self.questions)[k])
            },
        }


def _person(rng: random.Random, spec: tuple[str, str, str]) -> Person:
    name, alias, gender = spec
    rel = rng.choice(("sister", "brother"))
    cities = rng.sample(CITIES, 2)
    jobs = rng.sample(JOBS, 2)
    moves, new_job = rng.random() < 0.75, rng.random() < 0.6
    if not (moves or new_job):
        moves = True
    species = rng.sample(SPECIES, 2)
    pets = list(zip(species, rng.sample(PET_NAMES, 2), strict=True))
    events = []
    for statement, phrases, places in rng.sample(EVENTS, 3):
        events.append((statement, rng.choice(phrases), rng.choice(places)))
    details = [(k, rng.choice(DETAILS[k][2])) for k in rng.sample(sorted(DETAILS), 3)]
    return Person(
        name,
        alias,
        gender,
        rel,
        rng.choice(SIB_F if rel == "sister" else SIB_M),
        rng.choice(TOWNS),
        rng.choice(HOBBIES),
        cities if moves else cities[:1],
        jobs if new_job else jobs[:1],
        pets,
        rng.sample(TRIPS, rng.choice((2, 3))),
        events,
        rng.sample(SIB_OUTINGS, 2),
        details,
    )


def event_date(session_day: datetime, when: str) -> tuple[str, str]:
    """(ISO date or month, answer wording) of a relative expression said on a day."""
    if when == "last Saturday":
        back = (session_day.weekday() - 5) % 7 or 7
        d = session_day - timedelta(days=back)
        return d.strftime("%Y-%m-%d"), f"on Saturday {d.day} {d:%B %Y}"
    if when == "last weekend":
        back = (session_day.weekday() - 5) % 7 or 7
        d = session_day - timedelta(days=back)
        return d.strftime("%Y-%m-%d"), f"the weekend of {d.day} {d:%B %Y}"
    if when == "last month":
        d = session_day.replace(day=1) - timedelta(days=1)
        return d.strftime("%Y-%m"), f"in {d:%B %Y}"
    days = dict((w, n) for w, n in WHENS if n is not None)[when]
    d = session_day - timedelta(days=days)
    return d.strftime("%Y-%m-%d"), f"on {d.day} {d:%B %Y}"


def _plan(rng: random.Random, people: list[Person], n: int) -> list[list[Plant]]:
    """Which statement each session holds (changes come after what they change)."""
    per: list[list[Plant]] = [[] for _ in range(n)]
    early, mid = max(2, n // 4), n // 2

    def put(lo: int, hi: int, plant: Plant) -> int:
        i = rng.randrange(lo, max(lo + 1, hi))
        per[i].append(plant)
        return i

    for k, p in enumerate(people):
        put(
            0,
            early,
            Plant(
                k,
                "hometown",
                rng.choice(HOMETOWN_LINES).format(place=p.hometown),
                (p.hometown,),
                rng.choice(LEADS),
            ),
        )
        put(
            0,
            early,
            Plant(
                k,
                "sibling",
                rng.choice(SIBLING_LINES).format(rel=p.rel, sib=p.sib),
                (p.rel, p.sib),
                rng.choice(LEADS),
            ),
        )
        put(0, mid, Plant(k, "hobby", p.hobby[2], (p.hobby[1],)))
        put(
            0,
            early,
            Plant(k, "city0", rng.choice(CITY_LINES).format(city=p.cities[0]), (p.cities[0],)),
        )
        title, work = p.jobs[0]
        put(
            0,
            early,
            Plant(
                k,
                "job0",
                rng.choice(JOB_LINES).format(title=_a(title), work=work),
                (title, work.removeprefix("the ")),
            ),
        )
        if len(p.cities) > 1:
            when = rng.choice(("last weekend", "yesterday", "three days ago"))
            put(
                n // 3,
                2 * n // 3,
                Plant(
                    k,
                    "city1",
                    f"We finally moved to {p.cities[1]} {when}, I'm still unpacking boxes.",
                    (p.cities[1],),
                    rng.choice(LEADS),
                    when,
                ),
            )
        if len(p.jobs) > 1:
            title, work = p.jobs[1]
            put(
                mid,
                n - 1,
                Plant(
                    k,
                    "job1",
                    f"I started a new job as {_a(title)} at {work} this week!",
                    (title, work.removeprefix("the ")),
                    rng.choice(LEADS),
                ),
            )
        (s0, n0), (s1, n1) = p.pets
        when = rng.choice(("yesterday", "last weekend", "three days ago"))
        put(
            1,
            mid,
            Plant(
                k,
                "pet0",
                rng.choice(PET_LINES).format(species=s0, pet=n0, when=when),
                (s0, n0),
                rng.choice(LEADS),
                when,
            ),
        )
        put(
            mid + 1,
            n - 1,
            Plant(
                k,
                "pet1",
                rng.choice(PET2_LINES).format(species=s1, pet=n1),
                (s1, n1),
                rng.choice(LEADS),
            ),
        )
        for i, place in enumerate(p.trips):
            put(
                1,
                n,
                Plant(
                    k,
                    f"trip{i}",
                    rng.choice(TRIP_LINES).format(place=place),
                    (place.removeprefix("the "),),
                    echo=place,
                ),
            )
        for i, (statement, _, place) in enumerate(p.events):
            when = rng.choice(WHENS)[0]
            put(
                1,
                n,
                Plant(
                    k,
                    f"event{i}",
                    statement.format(place=place, when=when),
                    (place.removeprefix("the "),),
                    rng.choice(LEADS),
                    when,
                    place,
                ),
            )
        for i, outing in enumerate(p.outings):
            put(
                1,
                n,
                Plant(
                    k,
                    f"outing{i}",
                    f"{p.sib} and I {outing} together, it was so much fun.",
                    (p.sib, outing.split()[-1]),
                ),
            )
        for kind, value in p.details:
            statement = DETAILS[kind][0].format(x=value, rel=p.rel, sib=p.sib)
            put(1, n, Plant(k, f"detail:{kind}", statement, (value,), rng.choice(LEADS)))
    return per


class _Builder:
    def __init__(
        self, cfg: LongConvConfig, pair: str, n: int, day: datetime, rng: random.Random
    ) -> None:
        sid = f"{pair}-s{n:02d}"
        self.session = Session(
            app_name=cfg.app_name, user_id=pair, session_id=sid, created_at=day.timestamp()
        )
        self.clock = day.timestamp()
        self.rng = rng

    def say(self, who: Person, text: str) -> Event:
        self.clock += self.rng.uniform(20.0, 150.0)
        sid = self.session.session_id
        event = Event(
            author=who.name,
            role="user",
            type="message",
            text=text,
            id=f"{sid}-t{len(self.session.events):03d}",
            session_id=sid,
            timestamp=round(self.clock, 3),
        )
        self.session.apply(event)
        return event


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _filler(
    rng: random.Random,
    me: Person,
    state: dict[str, Any],
    used: set[int],
) -> tuple[str, str]:
    """A chit-chat exchange not yet used in this session (repeats once all are)."""
    if len(used) >= len(FILLERS) - 1:
        used.clear()
    while True:
        i = rng.randrange(len(FILLERS))
        line, reply = FILLERS[i]
        if i in used or ("{pet}" in line and not state["pets"]):
            continue
        used.add(i)
        slots = {
            "show": rng.choice(SHOWS),
            "city": state["city"],
            "weather": rng.choice(WEATHER),
            "sib": me.sib,
            "work": state["work"],
            "food": rng.choice(FOODS),
            "who": rng.choice(WHO),
            "species": rng.choice(SPECIES),
            "city2": rng.choice(CITIES),
            "job2": _a(rng.choice(JOBS)[0]),
            "pet": state["pets"][-1] if state["pets"] else "",
            "hobby": me.hobby[0],
        }
        return line.format(**slots), reply.format(**slots)


def _build_session(
    b: _Builder,
    people: list[Person],
    plants: list[Plant],
    states: list[dict[str, Any]],
    target: int,
) -> None:
    rng = b.rng
    a = rng.randrange(2)
    first, second = people[a], people[1 - a]
    b.say(first, rng.choice(GREETINGS).format(other=second.alias))
    b.say(second, rng.choice(GREET_REPLIES))
    blocks: list[tuple[str, Any]] = [("plant", p) for p in plants]
    # greeting + closing (4) + a plant and its reaction (2 each) + exchanges (2 each)
    fillers = max(1, -(-(target - 4 - 2 * len(plants)) // 2))
    blocks += [("filler", rng.randrange(2)) for _ in range(fillers)]
    rng.shuffle(blocks)
    used: set[int] = set()
    # Things told in earlier sessions, each referred back to at most once here.
    earlier = [list(dict.fromkeys(st["told"])) for st in states]
    for kind, item in blocks:
        if kind == "plant":
            me, other = people[item.speaker], people[1 - item.speaker]
            event = b.say(me, _pad(rng, item.text))
            item.event_id, item.session_id = event.id, b.session.session_id
            item.date = datetime.fromtimestamp(b.session.created_at, timezone.utc).strftime(
                "%Y-%m-%d"
            )
            _apply(states[item.speaker], me, item)
            if item.echo and rng.random() < 0.4:
                b.say(other, _slot_x(rng.choice(ECHO_REACTIONS), item.echo))
            else:
                b.say(other, _pad(rng, rng.choice(REACTIONS).format(other=me.alias)))
        elif earlier[item] and rng.random() < 0.25:
            told = earlier[item].pop(rng.randrange(len(earlier[item])))
            b.say(people[item], _pad(rng, _slot_x(rng.choice(ECHOES), told)))
            b.say(people[1 - item], rng.choice(ECHO_REPLIES))
        else:
            me = people[item]
            line, reply = _filler(rng, me, states[item], used)
            b.say(me, _pad(rng, line))
            b.say(people[1 - item], _pad(rng, reply))
    b.say(first, rng.choice(CLOSINGS))
    b.say(second, rng.choice(CLOSING_REPLIES).format(other=first.alias))
    b.session.ended_at = round(b.clock + 60.0, 3)


def _pad(rng: random.Random, text: str) -> str:
    """Most turns get a sentence or two more (real turns are longer than one line)."""
    roll = rng.random()
    if roll < 0.2:
        return f"{text} {' '.join(rng.sample(TAILS, 2))}"
    return f"{text} {rng.choice(TAILS)}" if roll < 0.65 else text


def _slot_x(template: str, x: str) -> str:
    return template.format(x=x, X=x[:1].upper() + x[1:])


def _apply(state: dict[str, Any], p: Person, plant: Plant) -> None:
    tag = plant.tag
    if plant.echo:
        state["told"].append(plant.echo)
    if tag == "city1":
        state["city"] = p.cities[1]
    elif tag == "job1":
        state["work"] = p.jobs[1][1]
    elif tag in ("pet0", "pet1"):
        state["pets"].append(p.pets[int(tag[-1])][1])


def _ev(p: Plant, dated: bool = False) -> dict[str, Any]:
    """The evidence of a question; ``dated``: its value words include the relative
    expression (a time question needs it with the date)."""
    return {
        "event_id": p.event_id,
        "session_id": p.session_id,
        "key": p.key,
        "must": [*p.must, *([p.when] if dated and p.when else [])],
        "date": p.date,
    }


def _questions(
    rng: random.Random, pair: str, people: list[Person], plants: dict[tuple[int, str], Plant]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def ask(
        kind: str,
        question: str,
        answer: str,
        evidence: list[Plant],
        stale: tuple[Plant, ...] | list[Plant] = (),
        **extra: Any,
    ) -> None:
        out.append(
            {
                "user_id": pair,
                "kind": kind,
                "question": question,
                "answer": answer,
                "evidence": [_ev(p, kind == "temporal") for p in evidence],
                **({"stale": [_ev(p) for p in stale]} if stale else {}),
                **extra,
            }
        )

    for k, p in enumerate(people):

        def nm(p: Person = p) -> str:
            return p.alias if rng.random() < 0.35 else p.name

        subj, obj, poss = (p.pron(i) for i in range(3))
        s0, n0 = p.pets[0]
        # single session
        pet_q = rng.choice(
            ("What is the name of {name}'s {s}?", "What did {name} call {poss} new {s}?")
        )
        ask("single_session", pet_q.format(name=nm(), s=s0, poss=poss), n0, [plants[k, "pet0"]])
        for kind, value in p.details:
            q = rng.choice(DETAILS[kind][1]).format(name=nm(), rel=p.rel, obj=obj, poss=poss)
            ask("single_session", q, value, [plants[k, f"detail:{kind}"]])
        # multi session
        ask(
            "multi_session",
            f"What pets does {nm()} have now?",
            " and ".join(f"a {s} named {n}" for s, n in p.pets),
            [plants[k, "pet0"], plants[k, "pet1"]],
        )
        ask(
            "multi_session",
            f"Which places has {nm()} traveled to?",
            ", ".join(p.trips),
            [plants[k, f"trip{i}"] for i in range(len(p.trips))],
        )
        ask(
            "multi_session",
            f"What activities has {nm()} done with {poss} {p.rel}?",
            ", ".join(p.outings),
            [plants[k, "outing0"], plants[k, "outing1"]],
        )
        # temporal
        for i, (_, phrase, place) in enumerate(p.events):
            ev = plants[k, f"event{i}"]
            date, wording = event_date(_day(ev.date), ev.when)
            ask(
                "temporal",
                f"When did {nm()} {phrase.format(place=place)}?",
                wording,
                [ev],
                date=date,
                relative=ev.when,
            )
        ev = plants[k, "pet0"]
        date, wording = event_date(_day(ev.date), ev.when)
        ask("temporal", f"When did {nm()} adopt {n0}?", wording, [ev], date=date, relative=ev.when)
        if len(p.cities) > 1:
            ev = plants[k, "city1"]
            date, wording = event_date(_day(ev.date), ev.when)
            ask(
                "temporal",
                f"When did {nm()} move to {p.cities[1]}?",
                wording,
                [ev],
                date=date,
                relative=ev.when,
            )
        # open domain: the speakers' lives, in other words than they used
        slots = {"rel": p.rel, "poss": poss}
        ask(
            "open_domain",
            rng.choice(OPEN_QUESTIONS["hometown"]).format(name=nm(), **slots),
            p.hometown,
            [plants[k, "hometown"]],
        )
        ask(
            "open_domain",
            rng.choice(OPEN_QUESTIONS["sibling"]).format(name=nm(), **slots),
            f"a {p.rel}, {p.sib}",
            [plants[k, "sibling"]],
        )
        ask(
            "open_domain",
            rng.choice(HOBBY_QUESTIONS).format(name=nm(), poss=poss),
            p.hobby[0],
            [plants[k, "hobby"]],
        )
        if len(p.jobs) == 1:
            ask(
                "open_domain",
                rng.choice(OPEN_QUESTIONS["job"]).format(name=nm(), **slots),
                f"{p.jobs[0][0]} at {p.jobs[0][1]}",
                [plants[k, "job0"]],
            )
        # changed facts: now and before
        if len(p.cities) > 1:
            ask(
                "changed_now",
                f"Which city does {nm()} live in now?",
                p.cities[1],
                [plants[k, "city1"]],
                [plants[k, "city0"]],
            )
            ask(
                "changed_before",
                f"Where did {nm()} live before moving to {p.cities[1]}?",
                p.cities[0],
                [plants[k, "city0"]],
            )
        if len(p.jobs) > 1:
            ask(
                "changed_now",
                f"What is {nm()}'s job these days?",
                f"{p.jobs[1][0]} at {p.jobs[1][1]}",
                [plants[k, "job1"]],
                [plants[k, "job0"]],
            )
            ask(
                "changed_before",
                f"What did {nm()} do before {subj} joined {p.jobs[1][1]}?",
                f"{p.jobs[0][0]} at {p.jobs[0][1]}",
                [plants[k, "job0"]],
            )
    return out


def _day(date: str) -> datetime:
    return datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=timezone.utc)


def generate_pair(cfg: LongConvConfig, i: int) -> tuple[list[Session], list[dict[str, Any]]]:
    rng = random.Random(f"longconv:{cfg.seed}:{i}")
    pair = f"pair-{i:03d}"
    people = [_person(rng, spec) for spec in rng.sample(SPEAKERS, 2)]
    per_session = _plan(rng, people, cfg.sessions)
    states = [{"city": p.cities[0], "work": p.jobs[0][1], "pets": [], "told": []} for p in people]
    day = START + timedelta(days=rng.randrange(0, 60))
    sessions = []
    for n in range(cfg.sessions):
        day += timedelta(
            days=rng.randint(5, 16),
            hours=rng.randint(17, 21) - day.hour,
            minutes=rng.randrange(60) - day.minute,
        )
        b = _Builder(cfg, pair, n, day, rng)
        _build_session(
            b, people, per_session[n], states, rng.randint(cfg.min_turns, cfg.max_turns - 1)
        )
        sessions.append(b.session)
    plants = {(p.speaker, p.tag): p for s in per_session for p in s}
    return sessions, _questions(rng, pair, people, plants)


def generate(cfg: LongConvConfig) -> Dataset:
    sessions: list[Session] = []
    questions: list[dict[str, Any]] = []
    for i in range(cfg.pairs):
        s, q = generate_pair(cfg, i)
        sessions += s
        questions += q
    for i, q in enumerate(questions):
        q["qid"] = f"lq{i:05d}"
    return Dataset(cfg, sessions, questions)


def write_dataset(ds: Dataset, out: str | Path) -> dict[str, Any]:
    """``archive/sessions.parquet``, ``questions.jsonl`` and (last) ``dataset.json``."""
    out = Path(out)
    (out / "archive").mkdir(parents=True, exist_ok=True)
    write_archive(ds.sessions, out / "archive" / "sessions.parquet")
    tmp = out / ".questions.jsonl.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        for q in ds.questions:
            f.write(json.dumps(q, ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(out / "questions.jsonl")
    meta = {
        "generator_version": GENERATOR_VERSION,
        "fingerprint": ds.config.fingerprint(),
        "config": asdict(ds.config),
        **ds.stats(),
    }
    # Written last: its presence means the directory is complete.
    (out / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def read_questions(path: str | Path) -> list[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_or_generate(cfg: LongConvConfig, cache_root: str | Path) -> tuple[Path, dict[str, Any]]:
    """The dataset directory for ``cfg`` under ``cache_root`` (generated on a miss)."""
    out = Path(cache_root) / f"longconv-{cfg.fingerprint()}"
    meta_path = out / "dataset.json"
    if meta_path.exists():
        return out, json.loads(meta_path.read_text())
    return out, write_dataset(generate(cfg), out)


__all__ = [
    "KINDS",
    "Dataset",
    "LongConvConfig",
    "event_date",
    "generate",
    "generate_pair",
    "load_or_generate",
    "read_questions",
    "write_dataset",
]
