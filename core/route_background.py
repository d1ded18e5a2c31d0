"""Background prompts: requests an agent receives that no engineering policy governs.

The abstention decision asks whether a prompt resembles a document *more than
unrelated requests do*. Raw cosines cannot say that: a short trigger line can
score 0.3-0.4 against an everyday sentence that shares one word with it
("plan a trip" vs "rollback plans"). Every index therefore scores these
sentences against each document once, at build time, and keeps each
document's background mean and spread; a candidate's semantic score is then
read as a z-score against its own document's background (``bg_z``).

The list is deliberately generic and broad (daily life, general knowledge,
writing, generic programming help, office work), written once for this
purpose and not copied from any labelled evaluation set. It is embedded
through the same cache as the corpus, so it costs one batch on the first
build only.
"""

from __future__ import annotations

BACKGROUND: tuple[str, ...] = (
    # daily life
    "What should I cook for dinner tonight with chicken and rice?",
    "Give me a weekly meal plan for a vegetarian diet",
    "How long should I boil an egg for a soft yolk?",
    "Suggest a workout routine for beginners at the gym",
    "How can I sleep better at night?",
    "What are the symptoms of a common cold?",
    "Help me write a birthday message for my grandmother",
    "Ideas for a weekend trip with kids near the mountains",
    "Find me a cheap hotel in Barcelona for next month",
    "What's the weather going to be like this weekend?",
    "How do I get red wine out of a carpet?",
    "My houseplant leaves are turning yellow, what's wrong?",
    "How often should I water tomatoes in summer?",
    "Recommend a podcast about true crime",
    "What are good board games for a family night?",
    "How do I train my puppy to stop biting?",
    "Which vacuum cleaner is best for pet hair?",
    "Tips for saving money on groceries",
    "How do I change a flat tyre on my car?",
    "What time does the pharmacy open on Sundays?",
    "Help me plan a surprise anniversary dinner",
    "What should I pack for a week at the beach?",
    "How do I fix a leaking kitchen tap?",
    "Suggest names for a golden retriever",
    "How many calories are in a banana?",
    # general knowledge and culture
    "Who painted the Mona Lisa?",
    "Explain the causes of the First World War",
    "Summarise the main ideas of stoic philosophy",
    "What is the tallest mountain in Africa?",
    "How does photosynthesis work?",
    "Tell me a fun fact about octopuses",
    "Who won the football World Cup in 2014?",
    "What is the difference between a virus and a bacterium?",
    "Explain the theory of relativity to a child",
    "Recommend some classic science fiction novels",
    "What are the rules of chess castling?",
    "How do volcanoes form?",
    "What is the population of Canada?",
    "Describe the architecture of Gothic cathedrals",
    "Which films won the most Oscars?",
    "Explain how the stock market works",
    "What language is spoken in Brazil?",
    "Write a short poem about the sea",
    "Tell me a joke about cats",
    "Write a bedtime story about a dragon who is afraid of the dark",
    # writing and office work
    "Proofread this paragraph for grammar mistakes",
    "Make this email to my landlord sound more polite",
    "Write a thank-you note to a colleague who is leaving",
    "Draft an agenda for our quarterly team offsite",
    "Summarise these meeting notes into bullet points",
    "Help me prepare for a job interview as a product manager",
    "Write a LinkedIn post announcing my new job",
    "Turn these numbers into a pie chart description",
    "Rewrite this sentence to be shorter",
    "Give me feedback on my presentation slides outline",
    "How do I ask my manager for a raise?",
    "Create a to-do list for moving to a new apartment",
    "Translate 'good morning, how are you' into Spanish",
    "What is a good title for a blog post about productivity?",
    "Compare two mortgage offers for me",
    # generic programming help that no policy governs
    "How do I reverse a string in JavaScript?",
    "What is the difference between a list and a tuple in Python?",
    "Explain recursion with a simple example",
    "Why does my for loop print the last value three times?",
    "Sort this array of numbers in descending order",
    "What does the static keyword mean in Java?",
    "Write a function that checks whether a number is prime",
    "How do I read a CSV file with pandas?",
    "Explain big O notation",
    "What is a closure in JavaScript?",
    "How do I make a button round with CSS?",
    "Parse a date string like 2024-03-01 in Go",
    "What's the difference between an interface and an abstract class?",
    "Explain how a hash map works internally",
    "Write a regex that matches an email address",
    "How do I install Node on my Mac?",
    "What does this error mean: index out of range?",
    "Convert this XML snippet to JSON",
    "How do I center text in a terminal window?",
    "Explain what a linked list is",
    "What is the binary representation of 42?",
    "Solve this sudoku puzzle for me",
    "How do I use list comprehensions?",
    "Rename this variable to something clearer",
    "Add comments to this function explaining each step",
    "What's a good keyboard shortcut for duplicating a line in VS Code?",
    "Explain the difference between HTTP GET and POST",
    "How does garbage collection work in Java?",
    "Implement binary search in C",
    "Why is floating point 0.1 + 0.2 not equal to 0.3?",
)
