/**
 * The bridge's dice as Foundry Roll data, for a card's Rolls (logic/cards.js cardMessageData):
 * every ruleset's dice go through here, so the animation shows the values the bridge rolled
 * instead of rolling its own. Pure: no Foundry globals.
 */

/**
 * @typedef {{faces: number, results: number[]}} DiceGroup dice of one size and their faces, in
 *   the order rolled (e.g. `{faces: 6, results: [3, 6, 1]}`)
 */

/**
 * A serialized, evaluated Roll of `groups` (the shape `Roll#toJSON` gives and `Roll.fromData`
 * takes: `Die` terms joined by `+` operator terms), e.g. `[{faces: 100, results: [34]}]` ->
 * the Roll `1d100` = 34.
 *
 * @param {DiceGroup[]} groups at least one group with at least one die
 * @returns {object} the Roll data; `total` is the sum of every face
 * @throws {TypeError} for an empty list, a group without dice, or a face or size that is not a
 *   positive integer
 */
export function rollData(groups) {
  if (!Array.isArray(groups) || groups.length === 0) throw new TypeError("rollData needs at least one group of dice");
  const terms = [];
  for (const { faces, results } of groups) {
    if (!Number.isInteger(faces) || faces < 1) throw new TypeError(`a die needs a positive whole number of faces, got ${faces}`);
    if (!Array.isArray(results) || results.length === 0 || !results.every((r) => Number.isInteger(r) && r >= 1 && r <= faces)) {
      throw new TypeError(`d${faces} results must be whole numbers 1..${faces}, got ${JSON.stringify(results)}`);
    }
    if (terms.length) terms.push({ class: "OperatorTerm", options: {}, evaluated: true, operator: "+" });
    terms.push({
      class: "Die", options: {}, evaluated: true, number: results.length, faces, modifiers: [],
      results: results.map((result) => ({ result, active: true })),
    });
  }
  const total = groups.reduce((sum, group) => sum + group.results.reduce((a, b) => a + b, 0), 0);
  const formula = groups.map((group) => `${group.results.length}d${group.faces}`).join(" + ");
  return { class: "Roll", options: {}, dice: [], formula, terms, total, evaluated: true };
}
