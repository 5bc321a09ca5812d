"""What a request needs: plan steps per task domain and the personal needs that bear on them.

A request implies a handful of plan steps (booking a table implies choosing
the place, picking a time, getting there and paying). Each step is shaped by
a few categories of personal need: what the user can eat, what their body
allows, how much money is free, what is already on the calendar, who comes
along, and so on. A fact about the user matters to a request exactly when its
need category bears on one of the request's steps. That one rule drives three
simulated answers, so they agree with each other without sharing hidden ids:

* query generation picks one life update per need that bears on the request
  (:mod:`memoryquest.simulator.queries`);
* the relevance judge reads a reference's need from its wording and accepts it
  when that need bears on a step (:mod:`memoryquest.simulator.relevance`);
* simulated PGR plans one probe per (step, need) from the request's wording
  alone (:mod:`memoryquest.simulator.pgr`).

The need of a text is read from a weighted cue lexicon over stems of
:func:`memoryquest.text.content_words`, the project's one tokenizer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from memoryquest.contracts import Domain
from memoryquest.simulator.needs.bridges import core_of
from memoryquest.text import content_words, stem


@dataclass(frozen=True)
class Need:
    """One category of personal circumstance that can change how a plan works out.

    ``probe``, ``facets`` and ``follow`` are the wordings simulated PGR uses:
    ``probe`` asks about the need for a plan step (``{step}``); ``facets`` are
    its constraints, one side of the need at a time (a probe that finds
    nothing is asked again from the next side); ``follow`` follows up on a
    retrieved fact (``{focus}`` is the fact's telling word). ``cues`` maps
    stems to weights: 3 names the need outright ("allergist"), 2 is typical of
    it, 1 merely leans towards it.
    """

    key: str
    label: str
    probe: str
    facets: tuple[str, ...]
    follow: str
    rationale: str
    cues: dict[str, int]

    @property
    def constraints(self) -> str:
        """The side of the need a probe asks about first."""
        return self.facets[0]


def _cues(strong: str, typical: str = "", weak: str = "") -> dict[str, int]:
    out: dict[str, int] = {}
    for weight, words in ((1, weak), (2, typical), (3, strong)):
        for word in words.split():
            out[stem(word.casefold())] = weight
    return out


NEEDS: dict[str, Need] = {
    need.key: need
    for need in (
        Need(
            "diet",
            "diet and allergies",
            "Whether a food allergy or a special diet limits {step}",
            (
                "food allergies, intolerances, coeliac or lactose problems, foods a doctor ruled out",
                "vegetarian, vegan, kosher or pescatarian eating, giving up meat or alcohol",
                "a special diet from a dietitian or cardiologist, low salt or sugar, soft food, food poisoning",
            ),
            "Which options stay safe to eat with the {focus} when {step}",
            "What the user may eat matters when {step}.",
            _cues(
                "allergist allergy allergic epipen gluten coeliac celiac lactose vegan vegetarian kosher halal "
                "dietitian dietician fodmap pescatarian intolerance intolerant poisoning",
                "diet nuts peanuts cashews pistachios walnuts hazelnuts almonds shellfish sesame dairy meat "
                "sugar cholesterol sodium salt alcohol fasting eats eating",
                "food meal meals snack snacks drink drinks",
            ),
        ),
        Need(
            "health",
            "injuries, mobility and health",
            "Whether an injury or health condition makes {step} harder",
            (
                "recent injuries, sprains, fractures, torn ligaments, a walking boot, cast or crutches",
                "surgery and recovery, physiotherapy, doctor's orders, no lifting or running",
                "long-term conditions, asthma, arthritis, heart trouble, medication, pregnancy",
            ),
            "How much walking, standing or stairs {step} involves given the {focus}",
            "What the user's body can manage right now matters when {step}.",
            _cues(
                "injury injured sprained sprain fractured fracture surgery operation physio physiotherapy "
                "physiotherapist crutches cast brace pregnant pregnancy asthma inhaler arthritis concussion "
                "orthopaedic orthopedic cardiologist antibiotics tendon ligament cane fasciitis pneumonia",
                "knee ankle wrist hip shoulder spine muscle leg foot feet doctor recovering recovery stairs limp "
                "walking standing diagnosed medication heart tooth dentist dental exercise breath filling",
                "pain hurt heavy stretches",
            ),
        ),
        Need(
            "budget",
            "money and budget",
            "How much money is really free for {step}",
            (
                "spending limits, a monthly budget, savings goals, cutting back on non-essentials",
                "rent going up, big bills, debts and loans, tuition or insurance payments",
                "income cut, fewer work hours, pension or allowance, refunds still pending, losses on shares",
            ),
            "What {step} costs given the {focus}",
            "How much the user can spend matters when {step}.",
            _cues(
                "budget spending savings saving rent refund debt loan overdraft tuition paycheck salary income "
                "pension allowance instalment installment bill bills",
                "money spend save cost costs expense expenses afford euros zloty dollars rand "
                "pesos fee fees income benefit cash deposit premium owed",
                "price prices cheaper paid pay essentials shares claim",
            ),
        ),
        Need(
            "schedule",
            "work, study and other commitments",
            "Which work, study or standing commitments clash with {step}",
            (
                "work shifts and office days, night shifts, on-call weekends, standing meetings",
                "classes, exams, deadlines, courses, a thesis or interview date",
                "weekly commitments, volunteering, choir or league evenings, tutoring, school runs",
            ),
            "Which days the {focus} leaves free for {step}",
            "What is already on the user's calendar matters when {step}.",
            _cues(
                "shift shifts rota exam exams lecture lectures seminar deadline deadlines rehearsal rehearses "
                "internship volunteers volunteering overtime thesis semester coursework",
                "class classes course training practice meeting meetings interview conference office "
                "job work works workday tutoring lab choir league school",
                "weekly weekday weekdays mornings evenings afternoons monday tuesday wednesday thursday friday "
                "saturday sunday",
            ),
        ),
        Need(
            "companions",
            "the people who come along",
            "Who comes along or is affected by {step}",
            (
                "partner, spouse, children, relatives staying over, guests in the house",
                "friends visiting, an exchange student, babysitting a niece or nephew, caring for a parent",
                "family events, weddings, promises to host friends or coworkers",
            ),
            "How {step} works for the {focus} too",
            "Who comes along matters when {step}.",
            _cues(
                "sister brother mother mom mum father dad parents grandmother grandma grandfather grandpa aunt "
                "uncle cousin nephew niece son daughter kids children toddler partner boyfriend girlfriend "
                "husband wife spouse fiance fiancee engaged babysitting grandchildren",
                "friend friends guest guests visiting visit family couple relatives staying host hosting birthday "
                "coworkers colleagues classmates",
                "together",
            ),
        ),
        Need(
            "pets",
            "pets",
            "Who looks after the pets while {step}",
            (
                "a dog or cat at home, feeding and walks, can't be left alone",
                "vet visits, pet medication, a pet passport, pet-sitting a friend's animal",
            ),
            "Whether the {focus} can come along or needs a sitter while {step}",
            "A pet that needs looking after matters when {step}.",
            _cues(
                "dog dogs puppy cat cats kitten pet pets vet rabbit parrot hamster kennel obedience",
                "sitter walker boarding leash litter",
            ),
        ),
        Need(
            "devices",
            "devices, apps and subscriptions",
            "Which phone, laptop, screen or app is available for {step}",
            (
                "phone broken, lost or replaced, laptop or tablet in repair",
                "streaming and music subscriptions cancelled or shared, console or TV broken",
                "home internet, data plan limits, headphones, smartwatch or smart speaker",
            ),
            "How {step} works with the {focus} situation",
            "Which devices and services the user has matters when {step}.",
            _cues(
                "phone smartphone laptop tablet ipad headphones earbuds smartwatch console playstation xbox "
                "router ereader reader kindle subscription streaming",
                "screen charger battery wifi data app apps account password tv television speaker pc "
                "computer netflix spotify smart nintendo broadband internet",
                "online device devices",
            ),
        ),
        Need(
            "documents",
            "passports, visas and papers",
            "Whether passport, visa or ID papers are in order for {step}",
            (
                "passport renewal or expiry, national ID card lost",
                "visa applications and embassy appointments, residence permit renewals",
                "health insurance card, international driving permit, papers with an old surname",
            ),
            "Whether the {focus} is sorted in time for {step}",
            "Whether the user's papers are in order matters when {step}.",
            _cues(
                "passport visa permit embassy consulate paperwork",
                "id documents renewal renewed certificate surname insurance card",
                "expires expired",
            ),
        ),
        Need(
            "travel_rewards",
            "travel points, status and passes",
            "Which miles, status or travel passes can cover {step}",
            (
                "airline miles expiring, frequent-flyer status, lounge access, companion pass",
                "hotel points or status, free-night awards, late checkout",
                "rail passes and railcards, bus passes, rental car loyalty upgrades",
            ),
            "How the {focus} can cover part of {step} before it lapses",
            "Travel points or passes the user holds matter when {step}.",
            _cues(
                "miles railcard lounge elite loyalty frequent pass",
                "points status upgrade award tier",
                "free lapses",
            ),
        ),
        Need(
            "vouchers",
            "vouchers, gift cards and memberships",
            "Which vouchers, gift cards or memberships could pay for {step}",
            (
                "gift cards and vouchers to spend, store credit, raffle prizes",
                "cinema or club memberships, season tickets, discount and stamp cards",
            ),
            "How the {focus} can be spent on {step}",
            "Vouchers or memberships the user holds matter when {step}.",
            _cues(
                "voucher vouchers gift membership coupon raffle stamp",
                "discount credit member card priority",
                "free",
            ),
        ),
        Need(
            "transport",
            "getting around",
            "How the user actually gets around for {step}",
            (
                "own car sold, in the garage, failed inspection, shared car, parking",
                "driving licence suspended, learner's permit, foreign licence",
                "commute changes, bike or e-scooter, tram or metro closures, lifts from colleagues",
            ),
            "How the {focus} situation changes {step}",
            "How the user can get around matters when {step}.",
            _cues(
                "car licence license driving garage mechanic parking bike bicycle scooter commute "
                "carpool tram metro learner",
                "drive drives gearbox tyre tire petrol charging electric motorbike transit",
                "lift ride",
            ),
        ),
        Need(
            "home",
            "home and household",
            "What is going on at home that affects {step}",
            (
                "a move or moving date, new flat, smaller place, far side of the city",
                "flatmates, neighbours complaining about noise, a baby's naps",
                "renovation, builders, broken heating or boiler, construction next door, landlord visits",
            ),
            "How the {focus} at home changes {step}",
            "What is happening at home matters when {step}.",
            _cues(
                "flatmate roommate housemate neighbour neighbor landlord renovation renovated renovating "
                "builders boiler baby nursery housesitting construction scaffolding drilling relocated",
                "flat apartment house kitchen bathroom lease district neighbourhood neighborhood "
                "home walls spare moved moving",
                "move quiet downstairs upstairs",
            ),
        ),
        Need(
            "hearing",
            "hearing and noise",
            "How loud it gets and whether that works for the user's hearing when {step}",
            (
                "tinnitus, hearing loss, hearing aids, ear infection",
                "headaches from loud music, noisy bars and venues",
            ),
            "Which quieter option suits the {focus} when {step}",
            "What the user can hear and stand in noise matters when {step}.",
            _cues(
                "tinnitus hearing deaf",
                "loud noise noisy ears ear volume",
            ),
        ),
        Need(
            "sight",
            "eyesight and light",
            "Whether eyesight, glare or bright light limits {step}",
            (
                "glasses or contact lenses, new prescription, small print",
                "migraines from bright or flashing light, glare, screen-time limits, night driving",
            ),
            "Which option is easier on the eyes given the {focus} when {step}",
            "What the user's eyes can manage matters when {step}.",
            _cues(
                "migraine migraines glare optician glasses eyesight varifocals eye lenses halos",
                "eyes light lights flashing bright",
                "dark",
            ),
        ),
        Need(
            "comfort",
            "motion, heat and crowds",
            "Which motion, heat or crowd limits matter for {step}",
            (
                "motion sickness, vertigo, winding roads, boats, heights",
                "heat intolerance, crowds and panic, claustrophobia, smoke or perfume",
            ),
            "Which calmer or steadier option suits the {focus} when {step}",
            "What the user can tolerate in motion, heat or crowds matters when {step}.",
            _cues(
                "motion seasick carsick vertigo nausea claustrophobic heatstroke heatwave crowds crowd altitude overheats overheat",
                "heat swaying winding packed smoke perfume dizzy panicky stuffy confined sick bronchitis incense scented "
                "escalators balconies heights",
                "hot cold sensitive",
            ),
        ),
        Need(
            "sleep",
            "sleep and energy",
            "How sleep and energy fit around {step}",
            (
                "insomnia, bedtime routine, sleep study, melatonin",
                "early wake-up times, late nights, jet lag, afternoon naps, light sleeping",
            ),
            "How {step} fits around the {focus}",
            "How the user is sleeping matters when {step}.",
            _cues(
                "sleep sleeping asleep insomnia melatonin bedtime jetlag lag sleepless wakes wake waking nap naps",
                "tired exhausted groggy rest",
                "night nights early",
            ),
        ),
    )
}
"""The need categories, in the order a plan usually meets them."""


@dataclass(frozen=True)
class PlanStep:
    """One step a request in ``domain`` implies, and the need categories that bear on it."""

    domain: Domain
    key: str
    phrase: str  # gerund phrase: "choosing the restaurant"
    needs: tuple[str, ...]


def _steps(domain: Domain, *rows: tuple[str, str, str]) -> tuple[PlanStep, ...]:
    return tuple(
        PlanStep(domain, f"{domain.value.lower()}:{key}", phrase, tuple(needs.split()))
        for key, phrase, needs in rows
    )


D = Domain
DOMAIN_PLANS: dict[Domain, tuple[PlanStep, ...]] = {
    D.ALARM: _steps(
        D.ALARM,
        ("wake", "setting the wake-up time", "schedule sleep"),
        ("sound", "choosing how the alarm sounds", "home hearing"),
        ("device", "picking the device that rings", "devices"),
    ),
    D.BOOKS: _steps(
        D.BOOKS,
        ("choose", "choosing what to read and in which format", "sight devices"),
        ("time", "finding time to read", "sleep schedule"),
        ("meet", "hosting the readers", "home"),
    ),
    D.BUSES: _steps(
        D.BUSES,
        ("when", "picking the departure", "schedule"),
        ("ticket", "buying the bus ticket", "travel_rewards"),
        ("ride", "sitting through the ride", "comfort health"),
        ("luggage", "getting to the bus station with luggage", "pets"),
    ),
    D.CALENDAR: _steps(
        D.CALENDAR,
        ("slot", "finding a free slot in the calendar", "schedule companions"),
        ("place", "getting to where it happens", "transport"),
        ("reminders", "setting up the reminders", "devices"),
    ),
    D.EVENTS: _steps(
        D.EVENTS,
        ("pick", "picking the event", "comfort hearing health"),
        ("tickets", "buying the tickets", "budget vouchers"),
        ("travel", "getting to the venue and back", "transport"),
    ),
    D.FINANCE: _steps(
        D.FINANCE,
        ("money", "setting money aside", "budget home"),
        ("tools", "handling the accounts and paperwork", "devices documents"),
    ),
    D.FLIGHTS: _steps(
        D.FLIGHTS,
        ("papers", "getting the travel documents ready", "documents"),
        ("fare", "paying for the fare", "travel_rewards budget"),
        ("seat", "sitting through the flight", "health comfort"),
        ("airport", "getting to the airport", "transport"),
    ),
    D.GAMES: _steps(
        D.GAMES,
        ("platform", "choosing the console or PC to play on", "devices"),
        ("time", "fitting in the play time", "sleep schedule"),
        ("where", "setting up where to play", "home"),
        ("comfort", "getting through long sessions", "health sight"),
    ),
    D.HOTELS: _steps(
        D.HOTELS,
        ("where", "choosing the hotel and room", "health hearing pets"),
        ("pay", "paying for the room", "travel_rewards budget"),
        ("arrival", "arriving and parking", "transport"),
    ),
    D.MEDIA: _steps(
        D.MEDIA,
        ("what", "choosing what to watch", "companions hearing"),
        ("screen", "picking the screen and service", "devices sight"),
        ("when", "finding an evening to watch", "home sleep"),
    ),
    D.MESSAGING: _steps(
        D.MESSAGING,
        ("who", "deciding who gets the message", "companions"),
        ("app", "picking the app and device", "devices"),
        ("timing", "timing the message", "schedule sleep"),
    ),
    D.MOVIES: _steps(
        D.MOVIES,
        ("film", "choosing the film and showing", "companions hearing sight"),
        ("seats", "booking seats and tickets", "health vouchers"),
        ("travel", "getting to the cinema", "transport"),
    ),
    D.MUSIC: _steps(
        D.MUSIC,
        ("listen", "choosing what to play and on what", "devices hearing"),
        ("live", "going to hear it live", "budget comfort"),
        ("home", "playing it at home", "home"),
    ),
    D.RENTAL_CARS: _steps(
        D.RENTAL_CARS,
        ("driver", "working out who can drive", "transport documents sight"),
        ("car", "choosing the car", "companions pets"),
        ("pay", "paying for the rental", "travel_rewards"),
    ),
    D.RESTAURANTS: _steps(
        D.RESTAURANTS,
        ("choose", "choosing the restaurant", "diet hearing companions"),
        ("travel", "getting there and back", "health"),
        ("pay", "paying the bill", "budget vouchers"),
    ),
    D.SERVICES: _steps(
        D.SERVICES,
        ("provider", "choosing the provider", "health budget documents"),
        ("slot", "booking the appointment slot", "schedule companions"),
        ("travel", "getting to the appointment", "transport"),
    ),
    D.SHOPPING: _steps(
        D.SHOPPING,
        ("what", "choosing what to buy", "budget home devices"),
        ("where", "getting to the shops", "transport"),
        ("pay", "paying at the till", "vouchers"),
    ),
    D.SPORTS: _steps(
        D.SPORTS,
        ("play", "playing or watching the match", "health comfort"),
        ("tickets", "getting the tickets", "vouchers budget"),
        ("date", "fitting the match into the week", "schedule"),
        ("travel", "getting to the ground", "transport"),
    ),
    D.TRAIN: _steps(
        D.TRAIN,
        ("when", "picking the train times", "schedule"),
        ("ticket", "buying the train ticket", "travel_rewards"),
        ("seat", "spending the journey on board", "comfort devices"),
        ("station", "getting to the station", "pets"),
    ),
    D.TRAVEL: _steps(
        D.TRAVEL,
        ("dates", "fixing the dates and time off", "schedule companions"),
        ("papers", "sorting out travel documents", "documents"),
        ("getting", "getting there", "comfort travel_rewards"),
        ("stay", "finding where to stay", "budget pets"),
        ("do", "choosing what to do there", "health"),
        ("meals", "working out the meals", "diet"),
    ),
}
"""The plan steps each PersonaLens domain implies, in the order they unfold."""


# --------------------------------------------------------------------------- reading a request

_DOMAIN_CUES: dict[Domain, re.Pattern[str]] = {
    domain: re.compile(pattern, re.IGNORECASE)
    for domain, pattern in (
        (
            D.ALARM,
            r"\balarms?\b|\bwake[- ]?up\b|\bwaking\b|\bsnooze\b|\b(?:morning|evening) routine\b",
        ),
        (
            D.BOOKS,
            r"\bbooks\b|\bbook club\b|\breading\b|\bread\b|\bnovels?\b|\bauthors?\b|\blibrary\b|\be-?books?\b",
        ),
        (D.BUSES, r"\bbus(?:es)?\b|\bcoach(?:es)?\b"),
        (
            D.CALENDAR,
            r"\bcalendar\b|\bschedul(?:e|ing)\b|\bblock off\b|\breschedule\b|\bevent on\b|\bmeetings?\b",
        ),
        (
            D.EVENTS,
            r"\bevents?\b|\bconcerts?\b|\bfestivals?\b|\bgigs?\b|\bcelebration\b|\bbirthday\b|\bparty\b|\bgetaway\b|\btickets? for\b",
        ),
        (
            D.FINANCE,
            r"\bfinances?\b|\binvest(?:ment|ments|ing)?\b|\bportfolio\b|\bstocks?\b|\bearnings\b|\bmarkets?\b",
        ),
        (D.FLIGHTS, r"\bflights?\b|\bfly(?:ing)?\b|\bairlines?\b|\bairport\b"),
        (D.GAMES, r"\bgaming\b|\bvideo games?\b|\bgame night\b|\bboard games?\b|\bgames\b"),
        (D.HOTELS, r"\bhotels?\b|\baccommodations?\b"),
        (
            D.MEDIA,
            r"\bmovie night\b|\bentertainment\b|\bstreaming\b|\bseries\b|\bshows?\b|\btv\b|\bwatch(?:ing)? at home\b|\bday at home\b",
        ),
        (
            D.MESSAGING,
            r"\bmessages?\b|\bmessaging\b|\btext(?:ing)?\b|\bgroup chat\b|\bcoordinate\b|\binvit(?:e|ations?)\b",
        ),
        (D.MOVIES, r"\bmovies?\b|\bfilms?\b|\bcinema\b|\btheat(?:er|re)s?\b|\bshowtimes?\b"),
        (D.MUSIC, r"\bmusic\b|\bplaylists?\b|\bsongs?\b|\balbums?\b|\bartists?\b|\bbands?\b"),
        (D.RENTAL_CARS, r"\brental cars?\b|\brent a car\b|\bcar rentals?\b|\bhire car\b"),
        (
            D.RESTAURANTS,
            r"\brestaurants?\b|\bdinner\b|\blunch\b|\bbrunch\b|\bdining\b|\bdine\b|\btable for\b",
        ),
        (
            D.SERVICES,
            r"\bappointments?\b|\bhaircut\b|\bdent(?:ist|al)\b|\bdoctor\b|\bsalon\b|\bspa\b|\bmassage\b|\bservice provider\b|\bself-care\b",
        ),
        (D.SHOPPING, r"\bshopping\b|\bshops?\b|\bmall\b|\bstores?\b|\bgifts?\b"),
        (
            D.SPORTS,
            r"\bsports?\b|\bmatch\b|\bteam\b|\bleague\b|\bviewing party\b|\bgame or match\b",
        ),
        (D.TRAIN, r"\btrains?\b|\brail(?:way)?\b"),
        (
            D.TRAVEL,
            r"\btrips?\b|\btravel\b|\bvacation\b|\bholiday\b|\bgetaway\b|\bitinerary\b|\bdestinations?\b|\bmulti-city\b",
        ),
    )
}


def domain_hits(text: str) -> list[tuple[Domain, int]]:
    """Domains the wording of a request points to, with how many cue words each has, strongest first."""
    scored: list[tuple[int, int, Domain]] = []
    for domain, pattern in _DOMAIN_CUES.items():
        hits = list(pattern.finditer(text))
        if hits:
            scored.append((-len(hits), hits[0].start(), domain))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [(domain, -count) for count, _, domain in scored]


def infer_domains(text: str, limit: int = 2) -> list[Domain]:
    """The domains a request's wording points to, strongest first (at most ``limit``)."""
    return [domain for domain, _ in domain_hits(text)[:limit]]


SECOND_DOMAIN_HITS = 2
"""Cue words a request needs before a domain other than its own adds plan steps."""


def needs_of_request(text: str, domain: Domain | None = None) -> list[PlanStep]:
    """The plan steps a request implies: its own domain's first, then one more domain its wording stresses.

    With ``domain`` (the generator and the relevance judge know it), a second
    domain adds its steps only when the wording names it at least
    :data:`SECOND_DOMAIN_HITS` times ("concert tickets ... at a concert hall"),
    so a passing word does not widen the plan. Without it (simulated PGR sees
    only the request) the two domains the wording names most are used; an
    unreadable request falls back to the Calendar steps, the most generic plan.
    """
    hits = domain_hits(text)
    if domain is not None:
        domains = [domain] + [
            d for d, count in hits if d != domain and count >= SECOND_DOMAIN_HITS
        ][:1]
    else:
        domains = [d for d, _ in hits[:2]] or [D.CALENDAR]
    return [step for d in domains for step in DOMAIN_PLANS[d]]


def request_needs(steps: list[PlanStep]) -> list[str]:
    """The need categories of ``steps``, each once, in the order the steps meet them."""
    out: list[str] = []
    for step in steps:
        out.extend(n for n in step.needs if n not in out)
    return out


@cache
def breadth(need: str) -> int:
    """How many domains a need bears on: the fewer, the more a statement of it says about one request."""
    return sum(any(need in step.needs for step in steps) for steps in DOMAIN_PLANS.values())


def domain_needs(domain: Domain) -> frozenset[str]:
    """Every need category that bears on some plan step of ``domain``."""
    return frozenset(n for step in DOMAIN_PLANS[domain] for n in step.needs)


def step_for(need: str, steps: list[PlanStep]) -> PlanStep | None:
    """The first step ``need`` bears on."""
    return next((s for s in steps if need in s.needs), None)


# --------------------------------------------------------------------------- reading a statement


def need_scores(text: str) -> dict[str, int]:
    """Cue weight of every need category present in ``text`` (absent ones left out).

    A bridge clause (what the update gets in the way of) is not read: the need is the update's own.
    """
    return dict(_need_scores(core_of(text)))


@lru_cache(maxsize=65_536)
def _need_scores(text: str) -> tuple[tuple[str, int], ...]:
    stems = set(content_words(text))
    scored = []
    for need in NEEDS.values():
        score = sum(weight for word, weight in need.cues.items() if word in stems)
        if score:
            scored.append((need.key, score))
    return tuple(scored)


def classify_need(text: str) -> str | None:
    """The need category a statement is about, from its wording (None when no cue is strong enough).

    The highest total cue weight wins; ties go to the category listed first in
    :data:`NEEDS`. A lone weak cue (weight 1) is not enough.
    """
    scores = need_scores(text)
    if not scores:
        return None
    order = list(NEEDS)
    best = max(scores, key=lambda k: (scores[k], -order.index(k)))
    return best if scores[best] >= 2 else None


def cue_words(text: str, need: str) -> list[str]:
    """The words of ``text`` that point to ``need``, strongest first (for naming a fact's focus)."""
    cues = NEEDS[need].cues
    found: dict[str, int] = {}
    for word in re.findall(r"[A-Za-z][A-Za-z'\-]*", text):
        weight = cues.get(stem(word.casefold()), 0)
        if weight and word.casefold() not in found:
            found[word.casefold()] = weight
    return sorted(found, key=lambda w: -found[w])
