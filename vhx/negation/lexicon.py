"""The word lists of the rule negator: auxiliaries, determiners, prepositions, adjectives, verbs and the
nouns that change how a phrase reads. :mod:`vhx.negation.grammar` splits questions with them; nothing here
looks at a question.

The lists are general English, grown where a benchmark's wording showed a gap (MME, POPE, AMBER,
HallusionBench), never a list of any benchmark's questions.
"""

from __future__ import annotations

BE = {"is", "are", "was", "were", "am", "isn't", "aren't", "wasn't", "weren't"}
HAVE = {"has", "have", "had", "hasn't", "haven't", "hadn't"}
_MODALS = {
    "can", "could", "will", "would", "should", "shall", "may", "might", "must", "cannot",
    "can't", "couldn't", "won't", "wouldn't", "shouldn't", "mustn't",
}
DO = {"does", "do", "did", "doesn't", "don't", "didn't"}
AUX = BE | HAVE | _MODALS | DO

PRONOUNS = {
    "it", "you", "he", "she", "they", "we", "i", "there", "someone", "somebody", "anyone", "anybody",
    "something", "anything", "everyone", "everybody", "everything", "nobody", "nothing",
}
THIRD_SINGULAR_PRONOUNS = {
    "it", "he", "she", "this", "that", "someone", "somebody", "anyone", "anybody", "something",
    "anything", "everyone", "everybody", "everything", "nobody", "nothing",
}
DEMONSTRATIVES = {"this", "that", "these", "those"}
NUMBER_WORDS = {
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "several", "many", "few", "multiple",
}
#: Exact counts ("Is there one ship?", "Are there 12 cars?"): a number a count question names, not "several".
CARDINALS = {
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
}
# Words that open a noun phrase; a run of them is skipped before the head word ("all the dogs").
DETERMINERS = {
    "the", "a", "an", "this", "that", "these", "those", "his", "her", "its", "their", "my", "your",
    "our", "some", "any", "no", "each", "every", "all", "both", "another", "other",
} | NUMBER_WORDS
# After the head word only these determiners start a predicate ("Is the man a doctor?").
PREDICATE_DETERMINERS = {
    "the", "a", "an", "this", "these", "those", "his", "her", "its", "their", "my", "your", "our",
    "some", "any", "no",
}
CONNECTORS = {"of", "and", "or", "&"}
# Prepositions that also end a phrase on their own ("the dog on the left", "the man inside").
PARTICLES = {
    "left", "right", "out", "up", "down", "off", "over", "close", "far", "next", "past", "inside",
    "outside", "behind", "around", "along", "near",
}
PREPOSITIONS = {
    "about", "above", "across", "against", "along", "alongside", "among", "around", "as", "at", "atop",
    "before", "behind", "below", "beneath", "beside", "between", "beyond", "by", "close", "down",
    "during", "far", "for", "from", "in", "inside", "into", "left", "like", "near", "next", "off", "on",
    "onto", "out", "outside", "over", "past", "right", "than", "through", "to", "toward", "towards",
    "under", "underneath", "up", "upon", "with", "within", "without",
}
ADVERBS = {
    "not", "never", "very", "too", "so", "quite", "really", "completely", "partially", "partly",
    "fully", "mostly", "mainly", "slightly", "almost", "nearly", "only", "just", "still", "also",
    "even", "all", "both", "each", "more", "less", "most", "least", "currently", "actually", "clearly",
    "entirely", "totally", "exactly", "directly", "here", "there", "now", "today", "nearby", "together",
    "apart", "away", "indoors", "outdoors", "upstairs", "downstairs", "ahead", "backwards", "forward",
    "forwards", "sideways", "upside", "always", "often", "usually", "ever",
}
# Words that grade a final adjective ("half full"): with it they start the predicate.
DEGREE = {"half", "partially", "barely", "somewhat", "rather", "fairly", "pretty", "extremely", "highly"}
# Words that shade a colour or state after the head noun ("pure white", "pale blue", "brand new"): with the
# adjective they start the predicate.
SHADES = {"pure", "brand", "bright", "dark", "deep", "pale", "fluorescent", "neon", "jet"}
COLOURS = {
    "red", "orange", "yellow", "green", "blue", "purple", "violet", "pink", "brown", "black", "white",
    "gray", "grey", "silver", "gold", "golden", "beige", "tan", "cyan", "magenta", "maroon", "navy",
    "turquoise", "teal", "transparent", "colorful", "colourful", "multicolored", "multicoloured",
    "dark", "pale", "bright", "deep",
}
_SHAPES = {
    "round", "square", "circular", "rectangular", "triangular", "oval", "spherical", "cylindrical",
    "hexagonal", "octagonal", "pentagonal", "flat", "curved", "straight", "pointed", "pointy",
    "crooked", "bent", "crescent", "heart-shaped", "star-shaped", "diamond-shaped", "symmetric", "symmetrical",
}
_SIZES = {
    "big", "small", "large", "tiny", "huge", "giant", "tall", "short", "long", "wide", "narrow",
    "thick", "thin", "little", "enormous", "massive", "same", "equal", "different", "similar",
    "identical",
}
_STATES = {
    "open", "closed", "shut", "visible", "invisible", "present", "absent", "empty", "full", "lit",
    "wet", "dry", "clean", "dirty", "new", "old", "young", "happy", "sad", "angry", "asleep", "awake",
    "alone", "alive", "dead", "upright", "vertical", "horizontal", "diagonal", "level", "hot", "cold",
    "warm", "cool", "sunny", "cloudy", "rainy", "snowy", "foggy", "shiny", "smooth", "rough", "soft",
    "hard", "striped", "spotted", "plain", "bald", "male", "female", "ripe", "raw", "whole", "intact",
    "real", "fake", "natural", "artificial", "clear", "blurry", "sharp", "busy", "crowded", "quiet",
    "safe", "dangerous", "healthy", "fresh", "used", "able", "likely", "possible", "correct", "true",
    "false", "wrong", "ready", "available", "complete", "partial", "on", "off", "free", "occupied",
    "fluffy", "furry", "wooden", "metal", "metallic", "plastic", "sunlit", "appropriate", "inappropriate",
    "suitable", "unsuitable", "necessary", "enough", "sufficient", "normal", "abnormal", "edible", "legal",
    "illegal", "allowed", "permitted", "reasonable", "accurate", "same", "different", "similar", "equal",
}
ADJECTIVES = COLOURS | _SHAPES | _SIZES | _STATES
COMPARATIVES = {
    "bigger", "smaller", "larger", "taller", "shorter", "longer", "wider", "narrower", "higher", "lower",
    "closer", "nearer", "farther", "further", "brighter", "darker", "lighter", "heavier", "thicker",
    "thinner", "older", "younger", "newer", "greater", "fewer", "more", "less", "better", "worse",
    "faster", "slower", "deeper", "cleaner", "dirtier", "wetter", "warmer", "colder", "hotter",
    "softer", "harder", "rounder", "biggest", "smallest", "largest", "tallest", "shortest", "longest",
    "highest", "lowest", "closest", "nearest", "farthest", "furthest", "brightest", "darkest",
    "heaviest", "oldest", "youngest", "newest", "best", "worst",
}
IRREGULAR_PARTICIPLES = {
    "written", "shown", "seen", "taken", "broken", "hidden", "drawn", "worn", "given", "made", "held",
    "built", "hung", "shut", "stuck", "torn", "sewn", "thrown", "grown", "blown", "frozen", "chosen",
    "spoken", "stolen", "fallen", "eaten", "beaten", "bitten", "ridden", "driven", "forgotten",
    "gotten", "got", "done", "gone", "been", "known", "flown", "cut", "put", "laid", "caught", "bought",
    "brought", "taught", "found", "bound", "sold", "told", "kept", "slept", "spent", "sent", "lent",
    "meant", "felt", "dug", "spun", "shot", "fed", "led", "spread", "split", "sunk", "struck", "swept",
    "woven", "shaken", "shrunk", "sung", "swung", "won", "burnt", "spilt", "lost", "sat", "stood",
    "understood", "mounted", "placed",
}
# -ing / -ed words that are usually nouns (or colours) when they follow the head word.
NOT_PARTICIPLES = {
    "building", "ceiling", "painting", "clothing", "drawing", "thing", "string", "spring", "swing",
    "morning", "evening", "wedding", "railing", "icing", "frosting", "topping", "filling", "sibling",
    "lighting", "housing", "parking", "writing", "crossing", "sling", "stuffing", "dressing",
    "pudding", "awning", "opening", "bedding", "siding", "seating", "shed", "sled", "seed", "weed",
    "reed", "feed", "steed", "need", "speed", "breed", "tweed", "hundred", "sacred", "bread",
    "something", "anything", "nothing", "everything", "king", "ring", "wing", "sibling", "ceiling",
}
# Bare verbs that start the predicate of a do-/modal question; a word that is not listed can still be
# found by the fallbacks (see the module docstring).
VERBS = {
    "appear", "be", "become", "belong", "bend", "bite", "block", "bloom", "break", "burn", "buy",
    "carry", "cast", "catch", "chase", "climb", "close", "come", "contain", "cook", "cover", "cross",
    "cry", "cut", "dance", "depict", "display", "portray", "do", "drag", "drink", "drip", "drive", "eat", "extend",
    "face", "fall", "feature", "feed", "fight", "fill", "fit", "float", "flow", "fly", "follow", "form",
    "get", "give", "glow", "go", "graze", "grow", "hang", "have", "hide", "hit", "hold", "hug",
    "include", "jump", "keep", "kick", "kiss", "land", "laugh", "lay", "lead", "leak", "lean", "leave",
    "lick", "lie", "lift", "like", "live", "look", "make", "match", "melt", "move", "need", "open",
    "overlap", "own", "park", "perch", "pet", "play", "point", "pull", "push", "reach", "read",
    "reflect", "remain", "resemble", "rest", "ride", "run", "sail", "say", "see", "seem", "sell",
    "serve", "shade", "share", "shine", "show", "sing", "sink", "sit", "skate", "ski", "sleep",
    "smile", "sniff", "speak", "spray", "stand", "stare", "stay", "stop", "surf", "swim", "take",
    "talk", "throw", "touch", "tow", "turn", "use", "wait", "walk", "watch", "wave", "wear", "work",
    "write",
    # common verbs beyond scenes: reasoning, charts, code, everyday advice (MME's commonsense/numerical)
    "accept", "add", "affect", "agree", "allow", "answer", "apply", "arrive", "ask", "attack", "avoid",
    "bake", "bark", "bear", "beat", "begin", "believe", "blow", "boil", "borrow", "bounce", "breathe",
    "bring", "build", "call", "care", "cause", "change", "charge", "check", "choose", "clean", "collect",
    "compare", "complete", "connect", "consist", "continue", "control", "copy", "cost", "count", "create",
    "cure", "damage", "decide", "decrease", "deliver", "describe", "destroy", "die", "differ", "dig",
    "divide", "draw", "dress", "drop", "dry", "earn", "enter", "equal", "escape", "exceed", "exist",
    "expect", "explain", "explode", "fail", "feel", "find", "finish", "fix", "fold", "freeze", "gain",
    "grab", "greet", "guess", "happen", "harm", "hear", "heat", "help", "hunt", "hurt", "identify",
    "improve", "increase", "indicate", "injure", "join", "kill", "knock", "know", "last", "learn", "lend",
    "let", "lock", "lose", "love", "lower", "mark", "mean", "measure", "meet", "mix", "multiply", "name",
    "notice", "obey", "occur", "offer", "operate", "order", "output", "paint", "pass", "pay", "pick",
    "place", "plan", "plant", "pour", "power", "prefer", "prepare", "press", "prevent", "print",
    "produce", "protect", "provide", "raise", "rain", "receive", "recognize", "reduce", "refer",
    "release", "remove", "repair", "replace", "represent", "require", "return", "ring", "rise", "roll",
    "rotate", "save", "send", "set", "shake", "shoot", "shout", "shrink", "sign", "slide", "smell",
    "solve", "spend", "spill", "spin", "split", "spread", "start", "steal", "store", "study", "succeed",
    "suggest", "suit", "support", "survive", "swallow", "switch", "taste", "teach", "tell", "tend",
    "test", "think", "travel", "treat", "try", "understand", "vary", "want", "warn", "wash", "win",
    "wish", "worry", "wrap",
}
DO_KEEP = {"not", "never", "really", "actually", "also", "still", "ever", "just", "only", "always",
            "often", "usually", "even"}
IRREGULAR_PLURALS = {"people", "men", "women", "children", "mice", "teeth", "feet", "geese", "police"}
QUOTE_PAIRS = {"'": "'", '"': '"', "\u2018": "\u2019", "\u201c": "\u201d", "`": "`"}
TRAILING_PUNCT = ".,;:!"

# -- lists grown for AMBER's and HallusionBench's wordings --------------------------------------------
# Descriptive adjectives beyond colours, shapes, sizes and states: scene, weather, texture, material, mood,
# geometry. A word here after a subject's head noun starts the predicate ("Is the pond murky in this image?").
# Words that are as often the second noun of a compound ("light", "glass", "square" of "town square") are
# left out: after a head noun they would cut "the traffic light" in two.
_DESCRIPTIVE = {
    "calm", "lush", "dense", "sparse", "neat", "tidy", "messy", "vast", "dim", "rare", "ugly", "cute", "simple",
    "complex", "firm", "steep", "plump", "tight", "loose", "slow", "rapid", "fast", "quick", "low", "high",
    "shallow", "gentle", "vivid", "vibrant", "pristine", "barren", "verdant", "murky", "muddy", "dusty", "rusty",
    "sandy", "rocky", "grassy", "icy", "leafy", "hilly", "windy", "stormy", "misty", "hazy", "shady", "bare",
    "lively", "noisy", "peaceful", "beautiful", "elegant", "modern", "ancient", "antique", "vintage", "rustic",
    "fancy", "cozy", "dull", "faded", "shabby", "tattered", "ragged", "stale", "rotten", "moldy", "unripe",
    "juicy", "crispy", "crunchy", "tender", "delicious", "tasty", "spicy", "sweet", "sour", "bitter", "salty",
    "creamy", "uneven", "bumpy", "curly", "wavy", "hairy", "slim", "slender", "skinny", "fat", "chubby",
    "muscular", "strong", "weak", "tired", "sleepy", "hungry", "thirsty", "sick", "ill", "injured", "excited",
    "scared", "afraid", "nervous", "relaxed", "surprised", "curious", "playful", "friendly", "aggressive",
    "wild", "tame", "domestic", "adult", "elderly", "naked", "barefoot", "stationary", "motionless", "idle",
    "active", "inactive", "static", "solid", "liquid", "hollow", "sturdy", "fragile", "delicate", "rigid",
    "flexible", "stiff", "heavy", "deserted", "abandoned", "cluttered", "overcast", "irregular", "jagged",
    "spiral", "khaki", "azure", "emerald", "crimson", "scarlet", "ivory", "indigo", "bronze", "copper",
    "burgundy", "monochrome", "concrete", "prone", "supine", "ashore", "afloat", "good", "bad", "nice", "fine",
    "great", "excellent", "poor", "rich", "cheap", "expensive", "famous", "popular", "common", "unusual",
    "strange", "weird", "odd", "typical", "official", "original", "authentic", "genuine", "incorrect",
    "obvious", "apparent", "prominent", "noticeable", "significant", "consistent", "comfortable",
    "uncomfortable", "colored", "coloured", "patterned", "floral", "plaid", "checkered", "transparent",
    "opaque", "glossy", "matte", "shiny", "sparkling", "dazzling", "spectacular", "picturesque", "scenic",
    "perpendicular", "parallel", "congruent", "collinear", "concentric", "equilateral", "isosceles", "acute",
    "obtuse", "adjacent", "opposite", "convex", "concave", "tangent", "visible", "infinite", "finite",
}
# Adjectives that compare ("the same size", "different length"): after a prepositional phrase they start
# the predicate even when a noun follows them ("Is the line on the left different length as ...?").
COMPARISON_ADJECTIVES = {"same", "different", "similar", "equal", "identical", "unequal", "opposite"}
# Concrete nouns that end a compound name ("the tennis racket", "the fire hydrant", "the dining table"): a
# single such word between the head and "in this image" is part of the subject, not an unknown adjective.
OBJECT_NOUNS = {
    "racket", "racquet", "light", "lights", "hydrant", "sign", "meter", "bat", "glove", "glass", "dog", "plant",
    "table", "phone", "bear", "drier", "dryer", "ball", "board", "bag", "cup", "bottle", "bowl", "knife", "fork",
    "spoon", "chair", "couch", "sofa", "bed", "car", "truck", "bus", "train", "boat", "plane", "bike", "bicycle",
    "motorcycle", "horse", "cat", "bird", "cow", "sheep", "person", "man", "woman", "boy", "girl", "child",
    "tree", "building", "house", "door", "window", "wall", "floor", "road", "street", "shirt", "hat", "cap",
    "shoe", "shoes", "jacket", "coat", "dress", "umbrella", "clock", "vase", "book", "laptop", "keyboard",
    "mouse", "remote", "screen", "oven", "microwave", "sink", "toilet", "refrigerator", "fridge", "toaster",
    "kite", "skateboard", "surfboard", "skis", "snowboard", "suitcase", "backpack", "handbag", "tie", "cake",
    "lamp", "pole", "fence", "bench", "box", "basket", "plate", "tray", "pot", "pan", "jar", "towel", "pillow",
    "blanket", "curtain", "rug", "carpet", "mirror", "poster", "flag", "tower", "bridge", "tent", "net",
    "court", "track", "path", "wheel", "tire", "seat", "handle", "station", "player", "rider", "driver", "shop",
    "store", "room", "machine", "computer", "monitor", "camera", "cable", "wire", "rope", "key", "pen",
    "pencil", "card", "toy", "cone", "can", "rack", "park", "shelf", "cabinet", "desk", "counter", "tile",
    "tiles", "panel", "mat", "pad", "set", "bin", "tank", "tub", "case", "cover", "lid", "top", "line", "lines",
}
# Nouns a proper name follows in apposition ("the TV series Ocean Nights", "the album Blue Hours"):
# the name continues the phrase instead of opening a predicate noun phrase.
NAMING_NOUNS = {
    "series", "album", "band", "song", "novel", "brand", "company", "team", "city", "country", "river", "lake",
    "island", "character", "manga", "anime", "franchise", "game", "movie", "film", "show", "book", "magazine",
    "newspaper", "restaurant", "hotel", "museum", "airport", "university", "player", "singer", "actor",
    "actress", "artist", "painter", "author", "writer", "president", "king", "queen", "emperor", "channel",
}
# Words that open a wh-question: named in the reason a question is skipped.
WH_WORDS = {"what", "which", "who", "whom", "whose", "where", "when", "why", "how", "whether"}
# Verbs of charts, maps and reasoning questions ("Did Apple derive ...", "Does the meridian intersect ...").
_VERBS_MORE = {
    "achieve", "align", "attempt", "beat", "cause", "climb", "contain", "contribute", "derive",
    "disappear", "dominate", "drop", "earn", "employ", "enjoy", "experience", "export", "face", "fall",
    "generate", "grow", "hold", "import", "include", "intersect", "involve", "lack", "launch", "lead",
    "make", "outnumber", "outperform", "overtake", "own", "perform", "possess", "produce", "reach", "receive",
    "release", "remain", "reveal", "shrink", "sit", "suffer", "surpass", "surround", "tilt", "visit", "witness",
    "raise", "strike", "crouch", "squat", "glide", "perch", "bloom", "wither", "scratch", "kneel", "crawl",
    "lie", "hang", "float", "rest", "swing", "stretch", "bow", "nod", "pose", "clap", "wave", "point",
}
VERBS |= _VERBS_MORE
ADJECTIVES |= _DESCRIPTIVE | COMPARISON_ADJECTIVES
