import { ServiceClient } from '../../../src/api/client.js';
import type { Simulator } from '../../../src/simulator/index.js';
import { TEST_API_KEY } from '../../support/simulator.js';

const OUTCOMES = ['delivered', 'bounced', 'complained', 'failed'] as const;

/** Sends `count` emails through the simulator (two or three events each) and one contact event. */
export async function sendMail(sim: Simulator, label: string, count = 10): Promise<void> {
  const client = new ServiceClient({ baseUrl: sim.baseUrl, apiKey: TEST_API_KEY });
  try {
    for (let i = 0; i < count; i++) {
      await client.sendEmail({
        from: 'app@example.com',
        to: [`${OUTCOMES[i % OUTCOMES.length]}+${label}-${i}@example.com`],
        subject: `${label} ${i}`,
        html: '<p>x</p>',
      });
    }
  } finally {
    await client.close();
  }
  sim.emitContactEvent('contact.subscribed', `${label}@example.com`);
}
