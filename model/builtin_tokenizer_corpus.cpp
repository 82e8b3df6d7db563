// Training text for the built-in demo tokenizer: a few paragraphs of plain
// English written for this project, so its merges are common English pieces.

#include "model/builtin_tokenizer.hpp"

namespace troupe {

std::string_view builtin_tokenizer_corpus() {
  return R"(The troupe arrived in the town on a cold morning in early spring. There were seven of them, and they
travelled in two painted wagons with a horse that would only walk when somebody sang to it. The eldest,
a woman called Marta, kept the accounts in a small book with a green cover. She wrote down every coin
they earned and every loaf of bread they bought, and at the end of each week she read the numbers aloud
so that nobody could say that the money had been wasted.

They played in the square in front of the church. The children came first, because children always
know when something is about to happen. Then the shopkeepers came out of their doors, wiping their hands
on their aprons, and the old men left their game of cards under the chestnut tree. By the time the first
song was over, the whole square was full of people who had told themselves that they would only stay for
a minute.

What did they perform? It changed from town to town. Sometimes it was a comedy about a king who had lost
his crown in a well; sometimes it was a sad story about two sisters who were separated by a river and
spoke to each other across the water every evening. The actors did not learn their parts from paper.
Each of them knew the shape of the story, and the words came new every night. That was the secret of the
troupe: no two evenings were ever the same, and so the same people came back again and again.

After the show, they counted the coins in the hat. On a good night there were more than a hundred; on a
bad night there were twelve, a button, and a note that said "thank you" in careful handwriting. Marta
wrote it all down. "A button is not money," said the youngest actor, who was called Tomas. "It is not
money," she agreed, "but it is a gift, and we write down gifts too."

In the morning they would pack the wagons, sing to the horse, and leave for the next town. The road was
long, and the weather was not always kind. When it rained they sheltered in barns and told each other
the stories they would perform next, changing a line here and there, trying a new ending, arguing about
whether the king should find his crown at all. These arguments were the best part of the journey, and
they often lasted for hours.

Many years later, people in those towns still remembered the evening the players came. They did not
remember the words, because the words were never written. They remembered the feeling of standing in the
square as the light went down, surrounded by their neighbours, listening to a story that was being made
for them and for nobody else. That is what a good performance gives: a moment that belongs to everyone who
was there, and that cannot be repeated.

Questions people asked the troupe, and the answers they gave:
- How many towns do you visit in a year? About forty, if the roads are open.
- Why don't you write your plays down? Because then they would stop growing.
- What do you do in winter? We mend the wagons, we sew new costumes, and we sleep.
- Is it true that the horse can count? Only to three, and only when it is hungry.

The numbers in Marta's book tell their own story: 1, 2, 3 wagons over the years; 7 actors, then 9, then 6;
12 towns in the first season and 41 in the best one. On the last page she wrote one line: "We were paid
in coins, in bread, in buttons, and in laughter, and the laughter was worth the most."
)";
}

}  // namespace troupe
